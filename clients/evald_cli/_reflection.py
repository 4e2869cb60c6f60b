"""A server's descriptors through gRPC reflection, fetched within stated bounds.

What a reflection server sends is outside data: it may never answer, answer forever,
import new files without end, send files of any size, or bytes that decode as nothing.
The fetch starts from the file declaring ``evald.v1.EvaluationService`` and follows
every import, one request per file, each answered by one message (a stream that keeps
sending is cancelled after it), under three bounds (``evald contract check`` flags):

* ``MAX_FILES`` (``--max-files``): descriptor files, the service's and all it imports;
* ``MAX_BYTES`` (``--max-bytes``): reflection answer bytes in all; the channel refuses
  one message larger than that by itself;
* ``TIMEOUT_S`` (``--timeout``): the whole fetch, every exchange within one deadline.

Anything else that is wrong ends it too: an answer that is not a reflection response,
a file that is not a ``FileDescriptorProto``, no file for a name asked for, files that
do not declare the service. Each is one ``ReflectionFailed`` line naming what happened
(server text in it escaped and cut to ``MAX_SHOWN_CHARS``) — exit 1, never a traceback.
"""

import time
from dataclasses import dataclass

import grpc
from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from grpc_reflection.v1alpha import reflection_pb2

from evald_cli._errors import CliError
from evald_cli._terminal import printable

SERVICE = "evald.v1.EvaluationService"
MAX_FILES = 200  # evald's contract is 15 files with its google/* imports
MAX_BYTES = 8 * 1024 * 1024  # its descriptors are ~42 KB
TIMEOUT_S = 30.0
MAX_SHOWN_CHARS = 200  # of a server's own text (an error message) in ours
_METHODS = {
    "v1": "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "v1alpha": "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
}


class ReflectionFailed(CliError):
    """The server's reflection answers broke a bound or were not what was asked for."""


@dataclass(frozen=True, slots=True)
class ReflectionLimits:
    """The bounds of one fetch (the module docstring says what each bounds)."""

    max_files: int = MAX_FILES
    max_bytes: int = MAX_BYTES
    timeout_s: float = TIMEOUT_S

    def channel_options(self) -> list[tuple[str, int]]:
        return [("grpc.max_receive_message_length", self.max_bytes)]


def shown(text: str) -> str:
    """A server's text as our messages quote it: one line, escaped, cut."""
    flat = printable(text, one_line=True)
    return flat if len(flat) <= MAX_SHOWN_CHARS else flat[: MAX_SHOWN_CHARS - 1] + "…"


class _Fetch:
    """One fetch's deadline and counts, shared by its exchanges."""

    def __init__(self, channel: grpc.Channel, limits: ReflectionLimits) -> None:
        self._channel = channel
        self._limits = limits
        self._deadline = time.monotonic() + limits.timeout_s
        self.received_bytes = 0
        self.files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
        self._imports: set[str] = set()

    def _out_of_time(self) -> ReflectionFailed:
        return ReflectionFailed(
            f"reflection did not finish within --timeout {self._limits.timeout_s:g} s "
            f"({len(self.files)} files received)"
        )

    def exchange(
        self, method: str, request: reflection_pb2.ServerReflectionRequest
    ) -> reflection_pb2.ServerReflectionResponse:
        """The first answer to ``request`` (the call is cancelled after it)."""
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise self._out_of_time()
        call = self._channel.stream_stream(
            method, request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString
        )  # answers stay bytes: decoded below, where a failure is ours to name
        answers = call(iter([request]), timeout=remaining)
        try:
            raw = next(answers, None)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise  # this reflection version is not served: the caller tries the next
            raise self._rpc_failure(exc) from exc
        finally:
            answers.cancel()
        if raw is None:
            raise ReflectionFailed("the server ended the reflection stream without an answer")
        self.received_bytes += len(raw)
        if self.received_bytes > self._limits.max_bytes:
            raise ReflectionFailed(
                f"the server's reflection answers exceed --max-bytes {self._limits.max_bytes} "
                f"({self.received_bytes} bytes so far)"
            )
        try:
            answer = reflection_pb2.ServerReflectionResponse.FromString(raw)
        except DecodeError as exc:
            raise ReflectionFailed(
                f"the server's reflection answer ({len(raw)} bytes) is not a "
                "ServerReflectionResponse"
            ) from exc
        if answer.HasField("error_response"):
            error = answer.error_response
            raise ReflectionFailed(
                f"reflection: {shown(error.error_message)} (code {error.error_code})"
            )
        return answer

    def _rpc_failure(self, exc: grpc.RpcError) -> ReflectionFailed:
        code = exc.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return self._out_of_time()
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return ReflectionFailed(
                f"a reflection answer is larger than --max-bytes {self._limits.max_bytes} "
                f"({shown(exc.details() or '')})"
            )
        return ReflectionFailed(f"reflection failed: {code.name} {shown(exc.details() or '')}")

    def add(
        self, answer: reflection_pb2.ServerReflectionResponse, asked: str, *, file: bool
    ) -> None:
        """Take the files of ``answer``, which must include ``asked`` when it names a
        ``file`` (rather than a symbol)."""
        which = answer.WhichOneof("message_response")
        if which != "file_descriptor_response":
            raise ReflectionFailed(
                f"the server answered a request for files with {which or 'nothing'}"
            )
        served = answer.file_descriptor_response.file_descriptor_proto
        for index, data in enumerate(served):
            if len(self.files) >= self._limits.max_files:
                raise ReflectionFailed(
                    f"the server's descriptors are more than --max-files "
                    f"{self._limits.max_files} files"
                )
            try:
                proto = descriptor_pb2.FileDescriptorProto.FromString(data)
            except DecodeError as exc:
                raise ReflectionFailed(
                    f"file {index + 1} of the answer for {shown(asked)} ({len(data)} bytes) is "
                    "not a FileDescriptorProto"
                ) from exc
            if not proto.name:
                raise ReflectionFailed(f"the answer for {shown(asked)} holds a file with no name")
            if proto.name not in self.files:
                self.files[proto.name] = proto
                self._imports.update(proto.dependency)
        if file and asked not in self.files:
            raise ReflectionFailed(f"the server did not serve {shown(asked)}, which is imported")
        needed = len(self._imports | self.files.keys())
        if needed > self._limits.max_files:
            raise ReflectionFailed(
                f"the server's descriptors are more than --max-files {self._limits.max_files} "
                f"files (they name {needed})"
            )

    def next_missing(self) -> str | None:
        """An import not fetched yet (the first by name), if any."""
        return min(self._imports - self.files.keys(), default=None)


def _fetch(fetch: _Fetch, method: str) -> None:
    first = reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE)
    fetch.add(fetch.exchange(method, first), SERVICE, file=False)
    # Each round adds the file it asks for (or fails): at most max_files rounds.
    while (name := fetch.next_missing()) is not None:
        request = reflection_pb2.ServerReflectionRequest(file_by_filename=name)
        fetch.add(fetch.exchange(method, request), name, file=True)
    package, _, service = SERVICE.rpartition(".")
    if not any(
        f.package == package and any(s.name == service for s in f.service)
        for f in fetch.files.values()
    ):
        raise ReflectionFailed(f"the server's reflection files declare no {SERVICE}")


def fetch_descriptors(
    channel: grpc.Channel, limits: ReflectionLimits
) -> tuple[dict[str, descriptor_pb2.FileDescriptorProto], str]:
    """The server's files for ``evald.v1.EvaluationService`` and everything they import,
    by name, and the reflection version that answered (v1, else v1alpha)."""
    fetch = _Fetch(channel, limits)
    unimplemented = ""
    for version, method in _METHODS.items():
        try:
            _fetch(fetch, method)
        except grpc.RpcError as exc:  # UNIMPLEMENTED only: _rpc_failure maps the others
            unimplemented = shown(exc.details() or "")
            continue
        return fetch.files, version
    raise ReflectionFailed(f"the server serves no gRPC reflection ({unimplemented})")
