"""The SDK's exceptions, and their translation from gRPC statuses.

Every failed RPC raises exactly one of these, chained ``from`` the ``grpc.RpcError``
(which never leaks to callers)::

    EvaldError                  (base; code, reason, domain, metadata, field_violations,
    │                            retry_after, message)
    ├── InvalidArgument         INVALID_ARGUMENT: fix the request (see field_violations)
    │   └── DatasetInvalid      INVALID_ARGUMENT with a DATASET_* reason: fix the data
    ├── NotFound                NOT_FOUND (also another tenant's ids)
    ├── AlreadyExists           ALREADY_EXISTS (immutable dataset version, request_id reuse)
    ├── FailedPrecondition      FAILED_PRECONDITION (e.g. retrying a live run)
    ├── ResourceExhausted       RESOURCE_EXHAUSTED (a named limit, see metadata)
    ├── OutOfRange              OUT_OF_RANGE (watch cursor older than the retained log)
    ├── Unauthenticated         UNAUTHENTICATED (missing or unknown token)
    ├── PermissionDenied        PERMISSION_DENIED
    ├── ProviderError           a PROVIDER_* reason (category MODEL_PROVIDER_ERROR)
    ├── Unavailable             UNAVAILABLE, ABORTED (retry later; see retry_after)
    ├── DeadlineExceeded        DEADLINE_EXCEEDED (the call's deadline passed)
    └── InternalError           INTERNAL, UNKNOWN, DATA_LOSS, UNIMPLEMENTED (a server bug)

The rich details (``google.rpc.ErrorInfo``, ``BadRequest``, ``RetryInfo``) are read from
the ``grpc-status-details-bin`` trailer.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import grpc
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2

_DETAILS_TRAILER = "grpc-status-details-bin"
_PROVIDER_CATEGORY = "MODEL_PROVIDER_ERROR"


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One invalid request field, as in ``google.rpc.BadRequest.FieldViolation``."""

    field: str
    description: str


class EvaldError(Exception):
    """The base of every error the SDK raises.

    ``code`` is the gRPC status name (``"NOT_FOUND"``), ``reason`` the contract's
    ErrorReason name (``"RUN_NOT_FOUND"``, or the code when the server sent no
    ErrorInfo), ``retry_after`` the server's suggested delay in seconds.
    """

    def __init__(
        self,
        message: str,
        *,
        code: str = "UNKNOWN",
        reason: str = "",
        domain: str = "",
        metadata: Mapping[str, str] | None = None,
        field_violations: tuple[FieldViolation, ...] = (),
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason or code
        self.domain = domain
        self.metadata: Mapping[str, str] = MappingProxyType(dict(metadata or {}))
        self.field_violations = field_violations
        self.retry_after = retry_after

    def __str__(self) -> str:
        head = self.code if self.reason == self.code else f"{self.code} {self.reason}"
        text = f"{head}: {self.message}" if self.message else head
        # Violations the message does not already spell out (servers often name a field
        # in the message by a shorter path than BadRequest does), so each is said once.
        extra = [
            f"{v.field}: {v.description}"
            for v in self.field_violations
            if v.description not in self.message
        ]
        return f"{text} ({'; '.join(extra)})" if extra else text


class InvalidArgument(EvaldError):
    """The request is malformed or out of range; ``field_violations`` name the fields."""


class DatasetInvalid(InvalidArgument):
    """An uploaded dataset is invalid; ``metadata`` names the line and field."""


class NotFound(EvaldError):
    """The run, dataset or model does not exist (or belongs to another tenant)."""


class AlreadyExists(EvaldError):
    """A dataset version with other content, or a reused request_id with another body."""


class FailedPrecondition(EvaldError):
    """The object is not in a state that allows the operation."""


class ResourceExhausted(EvaldError):
    """A configured limit would be exceeded; ``metadata`` names it."""


class OutOfRange(EvaldError):
    """A cursor (e.g. a watch's after_seq) is outside what the server retains."""


class Unauthenticated(EvaldError):
    """The bearer token is missing or unknown."""


class PermissionDenied(EvaldError):
    """The caller is authenticated but not allowed to do this."""


class ProviderError(EvaldError):
    """A model provider failed or refused (category MODEL_PROVIDER_ERROR)."""


class Unavailable(EvaldError):
    """The server cannot answer now (down, draining, overloaded); retry later."""


class DeadlineExceeded(EvaldError):
    """The call's deadline passed before the server answered."""


class InternalError(EvaldError):
    """The server failed unexpectedly (a bug); details are in the server's log."""


_BY_CODE: dict[str, type[EvaldError]] = {
    "INVALID_ARGUMENT": InvalidArgument,
    "NOT_FOUND": NotFound,
    "ALREADY_EXISTS": AlreadyExists,
    "FAILED_PRECONDITION": FailedPrecondition,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "OUT_OF_RANGE": OutOfRange,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "UNAVAILABLE": Unavailable,
    "ABORTED": Unavailable,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "INTERNAL": InternalError,
    "UNKNOWN": InternalError,
    "DATA_LOSS": InternalError,
    "UNIMPLEMENTED": InternalError,
}


@dataclass(frozen=True, slots=True)
class _Details:
    reason: str = ""
    domain: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    field_violations: tuple[FieldViolation, ...] = ()
    retry_after: float | None = None


def _details(trailing_metadata: Any) -> _Details:
    """The rich error details of a call's trailers; empty when absent or unreadable.

    Read here rather than with ``grpc_status.rpc_status.from_call``, which raises when
    the Status proto and the call disagree: a malformed detail must not turn the
    caller's error into a different exception.
    """
    blob = next(
        (value for key, value in (trailing_metadata or ()) if key == _DETAILS_TRAILER), None
    )
    if not isinstance(blob, bytes):
        return _Details()
    try:
        status = status_pb2.Status.FromString(blob)
    except DecodeError:
        return _Details()
    info = error_details_pb2.ErrorInfo()
    bad_request = error_details_pb2.BadRequest()
    retry_info = error_details_pb2.RetryInfo()
    found: dict[str, Any] = {}
    for detail in status.details:
        if detail.Is(info.DESCRIPTOR) and detail.Unpack(info):
            found.update(reason=info.reason, domain=info.domain, metadata=dict(info.metadata))
        elif detail.Is(bad_request.DESCRIPTOR) and detail.Unpack(bad_request):
            found["field_violations"] = tuple(
                FieldViolation(v.field, v.description) for v in bad_request.field_violations
            )
        elif detail.Is(retry_info.DESCRIPTOR) and detail.Unpack(retry_info):
            delay = retry_info.retry_delay
            found["retry_after"] = delay.seconds + delay.nanos / 1e9
    return _Details(**found)


def _class_for(code: str, details: _Details) -> type[EvaldError]:
    is_provider = details.reason.startswith("PROVIDER_") or (
        details.metadata.get("category") == _PROVIDER_CATEGORY
    )
    if is_provider:
        return ProviderError
    cls = _BY_CODE.get(code, EvaldError)
    if cls is InvalidArgument and details.reason.startswith("DATASET_"):
        return DatasetInvalid
    return cls


def error_from_status(code: str, message: str, trailing_metadata: Any = None) -> EvaldError:
    """The SDK exception for a gRPC status name, message and trailers."""
    details = _details(trailing_metadata)
    cls = _class_for(code, details)
    return cls(
        message,
        code=code,
        reason=details.reason,
        domain=details.domain,
        metadata=details.metadata,
        field_violations=details.field_violations,
        retry_after=details.retry_after,
    )


def error_from_rpc(exc: grpc.RpcError) -> EvaldError:
    """The SDK exception for a failed call; raise it ``from exc``."""
    code_fn = getattr(exc, "code", None)
    status = code_fn() if callable(code_fn) else None
    code = status.name if isinstance(status, grpc.StatusCode) else "UNKNOWN"
    details_fn = getattr(exc, "details", None)
    message = (details_fn() if callable(details_fn) else None) or ""
    trailers_fn = getattr(exc, "trailing_metadata", None)
    trailers = trailers_fn() if callable(trailers_fn) else None
    return error_from_status(code, str(message), trailers)
