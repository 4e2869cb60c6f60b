"""The edge of every RPC: authenticate, refuse while draining, map errors.

Expected failures (``EvaldError``) become a rich ``google.rpc.Status``; a database out
of reach (``StoreUnavailable``) is UNAVAILABLE, STORE_UNAVAILABLE, retryable (its
details, which name the database, stay in the log); anything else is a bug: logged
with its traceback and answered INTERNAL without details.
"""

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

import grpc

from evald_server.api._auth import TokenAuthenticator
from evald_server.api._registration import UndecodableRequest
from evald_server.api._status import internal_status, rpc_status_for, to_grpc_status
from evald_server.domain import ErrorReason, EvaldError, InvalidArgument
from evald_server.store import StoreUnavailable

log = logging.getLogger("evald.api")

Req = TypeVar("Req")
Resp = TypeVar("Resp")


class ServingState(Protocol):
    """What a handler needs from the servicer around it."""

    authenticator: TokenAuthenticator
    draining: bool


class ServerDraining(EvaldError):
    """The server is shutting down and takes no new calls."""


S = TypeVar("S", bound=ServingState)


def server_draining() -> ServerDraining:
    return ServerDraining(
        ErrorReason.SERVER_DRAINING,
        "the server is draining; retry on another replica",
        retry_after_s=1.0,
    )


def store_unavailable() -> EvaldError:
    return EvaldError(
        ErrorReason.STORE_UNAVAILABLE,
        "the server's database is unreachable; retry shortly, here or on another replica",
        retry_after_s=1.0,
    )


def _undecodable(request: UndecodableRequest) -> InvalidArgument:
    return InvalidArgument(
        ErrorReason.INVALID_ARGUMENT,
        f"the request is not a valid {request.message_type}: {request.problem}",
        metadata={"messageType": request.message_type},
    )


def _decoded(request: Any) -> Any:
    """The request, with undecodable messages (also inside a client stream) refused."""
    if isinstance(request, UndecodableRequest):
        raise _undecodable(request)
    if hasattr(request, "__aiter__"):

        async def checked() -> AsyncIterator[Any]:
            async for message in request:
                if isinstance(message, UndecodableRequest):
                    raise _undecodable(message)
                yield message

        return checked()
    return request


def _admit(servicer: ServingState, context: grpc.aio.ServicerContext[Any, Any]) -> str:
    if servicer.draining:
        raise server_draining()
    return servicer.authenticator.tenant_for(tuple(context.invocation_metadata() or ()))


async def _abort(
    context: grpc.aio.ServicerContext[Any, Any], error: BaseException, method: str
) -> None:
    if isinstance(error, StoreUnavailable):
        log.warning("%s: %s", method, error)
        error = store_unavailable()
    if isinstance(error, EvaldError):
        await context.abort_with_status(to_grpc_status(rpc_status_for(error)))
    log.error("unexpected error in %s", method, exc_info=error)
    await context.abort_with_status(to_grpc_status(internal_status()))


def unary(
    method: Callable[[S, Req, grpc.aio.ServicerContext[Any, Any], str], Awaitable[Resp]],
) -> Callable[[S, Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[Resp]]:
    """Wrap ``method(self, request, context, tenant)`` as a unary or client-stream handler."""

    @functools.wraps(method)
    async def handler(self: S, request: Req, context: grpc.aio.ServicerContext[Any, Any]) -> Resp:
        try:
            tenant = _admit(self, context)
            return await method(self, _decoded(request), context, tenant)
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as error:  # the one place bugs become INTERNAL
            await _abort(context, error, method.__name__)
            raise AssertionError("unreachable: abort_with_status raises") from error

    return handler


def server_stream(
    method: Callable[[S, Req, grpc.aio.ServicerContext[Any, Any], str], AsyncIterator[Resp]],
) -> Callable[[S, Req, grpc.aio.ServicerContext[Any, Any]], AsyncIterator[Resp]]:
    """Wrap ``method(self, request, context, tenant)`` as a server-streaming handler."""

    @functools.wraps(method)
    async def handler(
        self: S, request: Req, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Resp]:
        try:
            tenant = _admit(self, context)
            async for response in method(self, _decoded(request), context, tenant):
                yield response
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as error:  # the one place bugs become INTERNAL
            await _abort(context, error, method.__name__)

    return handler


__all__ = ["ServerDraining", "ServingState", "server_draining", "server_stream", "unary"]
