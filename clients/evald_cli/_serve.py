"""``evald serve``: the server, imported only when this command runs.

The client commands never import ``evald_server``: a machine with only the client and
the generated contract code can still run them.
"""

import functools
import logging
import sys
from pathlib import Path

import anyio

from evald_cli._errors import CliError

# The first stdout line of ``evald serve``; ``evald demo`` and scripts read the address
# from it.
READY_PREFIX = "evald listening on "


def serve(config_path: Path) -> int:
    try:
        from evald_server.api import serve as serve_api
        from evald_server.config import ConfigError, load_config
        from evald_server.store import StoreError
    except ImportError as exc:  # a client-only installation
        raise CliError(f"evald serve needs the evald server package: {exc}") from exc
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        raise CliError(f"config: {exc}") from exc

    # The server logs to stderr; stdout carries only the ready line.
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    def on_ready(address: str) -> None:
        print(f"{READY_PREFIX}{address}", flush=True)

    try:
        anyio.run(functools.partial(serve_api, config, on_ready=on_ready), backend="asyncio")
    except ConfigError as exc:  # e.g. the listen address cannot be bound
        raise CliError(f"config: {exc}") from exc
    except StoreError as exc:  # locked by another server, read-only, lost while serving
        raise CliError(f"store: {exc}") from exc
    sys.stdout.flush()
    return 0
