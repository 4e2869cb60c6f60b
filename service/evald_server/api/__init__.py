"""The gRPC edge: the evald.v1 servicer, error mapping, auth, and the server lifecycle."""

from evald_server.api._server import READY_PREFIX, run_server, serve

__all__ = ["READY_PREFIX", "run_server", "serve"]
