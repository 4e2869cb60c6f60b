"""``evald serve``: the server, imported only when this command runs.

The client commands never import ``evald_server``: a machine with only the client and
the generated contract code can still run them. The server has one entry,
``evald_server.api.run_server``, which this calls (``python -m evald_server.api`` too).
"""

from pathlib import Path

from evald_cli._errors import CliError

# The first stdout line of ``evald serve``; ``evald demo`` and scripts read the address
# from it (the server's own READY_PREFIX, kept equal by a test).
READY_PREFIX = "evald listening on "


def serve(config_path: Path) -> int:
    try:
        from evald_server.api import run_server
    except ImportError as exc:  # a client-only installation
        raise CliError(f"evald serve needs the evald server package: {exc}") from exc
    return run_server(config_path)
