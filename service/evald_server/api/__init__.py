"""The gRPC edge: the evald.v1 servicer, error mapping, auth, and the server lifecycle."""

from evald_server.api._server import main_serve, serve

__all__ = ["main_serve", "serve"]
