"""The ``evald`` command line: serve, demo, and the client commands (see ``evald -h``)."""

from evald_cli.main import main

__all__ = ["main"]
