"""``python -m evald_server.api --config evald.toml``: the server without the CLI.

The first line on stdout is ``evald listening on HOST:PORT`` (with port 0 in the config
this is how a parent process learns the port); logs go to stderr. The same entry as
``evald serve`` (``run_server``), with the same exit statuses.
"""

import argparse
import sys
from pathlib import Path

from evald_server.api._server import run_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evald_server.api")
    parser.add_argument("--config", type=Path, required=True, help="the server's TOML config")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    return run_server(args.config, log_level=args.log_level)


if __name__ == "__main__":
    sys.exit(main())
