"""A hostile gRPC reflection server on 127.0.0.1 port 0, for ``evald contract check``.

A real grpc.aio server (in a background thread, so the blocking CLI can call it) that
serves both reflection versions with whatever a test's ``Answer`` makes of each request:
raw answer bytes, any number of them (``FOREVER`` keeps the stream open). It counts the
requests it gets, and how many of its streams the client cancelled.
"""

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import grpc
from anyio.from_thread import start_blocking_portal
from google.protobuf import descriptor_pb2
from grpc_reflection.v1alpha import reflection_pb2

from evald_cli._contract import client_descriptors

Request = reflection_pb2.ServerReflectionRequest
Response = reflection_pb2.ServerReflectionResponse
# What the server sends for one request: answers (raw bytes), in order; None stops the
# stream, FOREVER repeats the answers before it until the client goes away.
Answer = Callable[[Request], Awaitable[Sequence[bytes | None]]]
FOREVER = b"forever"
_SERVICES = ("grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection")


def files_answer(*files: descriptor_pb2.FileDescriptorProto | bytes) -> bytes:
    """A reflection answer carrying ``files`` (messages, or raw bytes as they are)."""
    raw = [f if isinstance(f, bytes) else f.SerializeToString() for f in files]
    response = Response(file_descriptor_response={"file_descriptor_proto": raw})
    return response.SerializeToString()


def evald_files() -> dict[str, descriptor_pb2.FileDescriptorProto]:
    """evald's real contract (the files this client was generated from), by name."""
    return {f.name: f for f in client_descriptors().file}


def service_file(*imports: str) -> descriptor_pb2.FileDescriptorProto:
    """A file declaring ``evald.v1.EvaluationService`` (no methods) and importing
    ``imports``."""
    return descriptor_pb2.FileDescriptorProto(
        name="evald/v1/service.proto",
        package="evald.v1",
        dependency=list(imports),
        service=[{"name": "EvaluationService"}],
    )


def serving(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> Answer:
    """An honest server of ``files``: the service's file for the symbol, a file by name."""

    async def answer(request: Request) -> Sequence[bytes | None]:
        if request.HasField("file_containing_symbol"):
            return [files_answer(files["evald/v1/service.proto"])]
        return [files_answer(files[request.file_by_filename])]

    return answer


@dataclass
class HostileReflection:
    """The server's behaviour and what it saw."""

    answer: Answer
    unimplemented: bool = False  # answer UNIMPLEMENTED for both versions
    requests: list[Request] = field(default_factory=list)
    cancelled: int = 0  # streams the client cancelled (or left) before they ended

    async def _stream(
        self, requests: AsyncIterator[Request], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        if self.unimplemented:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        try:
            async for request in requests:
                self.requests.append(request)
                answers = await self.answer(request)
                if FOREVER in answers:
                    repeated = [a for a in answers if a not in (FOREVER, None)]
                    while True:  # until the client cancels (then this task is cancelled)
                        for answer in repeated:
                            yield answer
                        await asyncio.sleep(0.01)
                for answer in answers:
                    if answer is None:
                        return
                    yield answer
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    def handler(self) -> grpc.GenericRpcHandler:
        method = grpc.stream_stream_rpc_method_handler(
            self._stream, request_deserializer=Request.FromString
        )  # answers go out as the raw bytes given
        return _Handler(method)


class _Handler(grpc.GenericRpcHandler):
    def __init__(self, method: grpc.RpcMethodHandler) -> None:
        self._method = method

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        name: str = details.method  # type: ignore[attr-defined]
        service, _, rpc = name.strip("/").partition("/")
        return self._method if service in _SERVICES and rpc == "ServerReflectionInfo" else None


@contextmanager
def hostile_reflection(behaviour: HostileReflection) -> Iterator[str]:
    """Serve ``behaviour`` on 127.0.0.1 port 0 in a background thread; yields the address."""

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((behaviour.handler(),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    with start_blocking_portal(backend="asyncio") as portal:
        server, port = portal.call(start)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            portal.call(server.stop, None)
