"""``python -m evald_server.api --config evald.toml``: the server without the CLI.

The first line on stdout is ``evald listening on HOST:PORT`` (with port 0 in the config
this is how a parent process learns the port); logs go to stderr.
"""

import argparse
import logging
import sys
from pathlib import Path

from evald_server.api._server import READY_PREFIX, main_serve
from evald_server.config import ConfigError
from evald_server.store import StoreError, StoreLost


def announce(address: str) -> None:
    print(f"{READY_PREFIX}{address}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evald_server.api")
    parser.add_argument("--config", type=Path, required=True, help="the server's TOML config")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return main_serve(args.config, on_ready=announce)
    except ConfigError as error:
        print(f"evald: invalid config: {error}", file=sys.stderr)
        return 2
    except StoreLost as error:
        print(f"evald: stopped: {error}", file=sys.stderr)
        return 1
    except StoreError as error:
        print(f"evald: cannot open the store: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
