"""Errors of the server side.

Two shapes, kept apart on purpose:

* ``EvalError`` is *data*: a per-sample or per-task failure stored in the result and in
  ListSamples. It never aborts a run or an RPC.
* ``EvaldError`` and its subclasses are *expected request failures*, raised by the
  application layer and turned into a ``google.rpc.Status`` by the API layer::

    EvaldError                      (base; carries reason, message, metadata)
    ├── InvalidArgument             INVALID_ARGUMENT (field violations)
    │   └── DatasetInvalid          INVALID_ARGUMENT (line + field of the bad record)
    ├── NotFound                    NOT_FOUND (also for another tenant's ids)
    ├── AlreadyExists               ALREADY_EXISTS (immutable version, request_id reuse)
    ├── FailedPrecondition          FAILED_PRECONDITION
    ├── ResourceExhausted           RESOURCE_EXHAUSTED (a named limit)
    ├── OutOfRange                  OUT_OF_RANGE (watch cursor older than retention)
    └── Unauthenticated             UNAUTHENTICATED

The error table decides: each subclass stands for one gRPC code and accepts only the
reasons the table maps to it (``DatasetInvalid(DATASET_TOO_LARGE)`` is refused, that
reason is RESOURCE_EXHAUSTED); ``request_error`` picks the class from the reason.

Anything else raised inside a handler is a bug: logged with its traceback and answered
INTERNAL without details.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from evald_server.domain._enums import ErrorCategory, ErrorReason
from evald_server.domain._error_table import mapping_for


@dataclass(frozen=True, slots=True)
class EvalError:
    """A failure recorded as data (per sample or per task), in the graded taxonomy."""

    category: ErrorCategory
    reason: ErrorReason
    message: str
    retryable: bool = False
    http_equivalent: int = 0
    metadata: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, reason: ErrorReason, message: str, **metadata: object) -> "EvalError":
        """Build an error whose category and HTTP equivalent come from the error table."""
        mapping = mapping_for(reason)
        return cls(
            category=mapping.category,
            reason=reason,
            message=message,
            retryable=mapping.retryable,
            http_equivalent=mapping.http_equivalent,
            metadata={key: str(value) for key, value in metadata.items()},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "category": self.category.value,
            "reason": self.reason.value,
            "message": self.message,
            "retryable": self.retryable,
            "http_equivalent": self.http_equivalent,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "EvalError":
        return cls(
            category=ErrorCategory(data["category"]),
            reason=ErrorReason(data["reason"]),
            message=str(data["message"]),
            retryable=bool(data.get("retryable", False)),
            http_equivalent=int(data.get("http_equivalent", 0)),
            metadata={str(k): str(v) for k, v in dict(data.get("metadata", {})).items()},
        )


@dataclass(frozen=True, slots=True)
class FieldViolation:
    """One bad field of a request, as in ``google.rpc.BadRequest.FieldViolation``."""

    field: str
    description: str


class EvaldError(Exception):
    """Base of every expected request failure; the API layer maps it to a gRPC status."""

    grpc_code: ClassVar[str | None] = None  # a subclass's code; None: any reason

    def __init__(
        self,
        reason: ErrorReason,
        message: str,
        *,
        metadata: Mapping[str, object] | None = None,
        field_violations: tuple[FieldViolation, ...] = (),
        retry_after_s: float | None = None,
    ) -> None:
        code = mapping_for(reason).grpc_code
        if self.grpc_code is not None and code != self.grpc_code:
            raise TypeError(f"{type(self).__name__} cannot carry {reason.name}, a {code} reason")
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = {k: str(v) for k, v in (metadata or {}).items()}
        self.field_violations = field_violations
        self.retry_after_s = retry_after_s

    @property
    def category(self) -> ErrorCategory:
        return mapping_for(self.reason).category

    def with_field_paths(self, rewrite: Callable[[str], str]) -> None:
        """Rename the fields this error names (``metadata["field"]`` and every
        violation), e.g. from the application's names to their paths in a request."""
        if "field" in self.metadata:
            self.metadata["field"] = rewrite(self.metadata["field"])
        self.field_violations = tuple(
            FieldViolation(rewrite(v.field), v.description) for v in self.field_violations
        )


class InvalidArgument(EvaldError):
    """A request field is malformed or out of range."""

    grpc_code = "INVALID_ARGUMENT"


class DatasetInvalid(InvalidArgument):
    """An uploaded dataset has a bad record; metadata names the line and the field."""


class NotFound(EvaldError):
    """The named object does not exist, or belongs to another tenant."""

    grpc_code = "NOT_FOUND"


class AlreadyExists(EvaldError):
    """An immutable object exists with different content (dataset version, request_id)."""

    grpc_code = "ALREADY_EXISTS"


class FailedPrecondition(EvaldError):
    """The object is not in a state that allows the operation (e.g. retrying a live run)."""

    grpc_code = "FAILED_PRECONDITION"


class ResourceExhausted(EvaldError):
    """A configured limit would be exceeded; metadata names the limit and its value."""

    grpc_code = "RESOURCE_EXHAUSTED"


class OutOfRange(EvaldError):
    """A cursor points before what is retained (a WatchRun after_seq that has expired)."""

    grpc_code = "OUT_OF_RANGE"


class Unauthenticated(EvaldError):
    """The bearer token is missing or unknown."""

    grpc_code = "UNAUTHENTICATED"


_BY_CODE: dict[str, type[EvaldError]] = {
    cls.grpc_code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        AlreadyExists,
        FailedPrecondition,
        ResourceExhausted,
        OutOfRange,
        Unauthenticated,
    )
    if cls.grpc_code is not None
}


def request_error(
    reason: ErrorReason,
    message: str,
    *,
    metadata: Mapping[str, object] | None = None,
    field_violations: tuple[FieldViolation, ...] = (),
    retry_after_s: float | None = None,
) -> EvaldError:
    """The request failure for ``reason``, of the class its gRPC code stands for (a bad
    dataset's INVALID_ARGUMENT is a ``DatasetInvalid``)."""
    mapping = mapping_for(reason)
    cls = _BY_CODE.get(mapping.grpc_code, EvaldError)
    if cls is InvalidArgument and mapping.category is ErrorCategory.DATASET_INVALID:
        cls = DatasetInvalid
    return cls(
        reason,
        message,
        metadata=metadata,
        field_violations=field_violations,
        retry_after_s=retry_after_s,
    )


def field_error(
    field: str,
    description: str,
    message: str | None = None,
    *,
    reason: ErrorReason = ErrorReason.INVALID_ARGUMENT,
    metadata: Mapping[str, object] | None = None,
) -> EvaldError:
    """A request failure for one bad field: named in ``metadata["field"]`` and as the
    one BadRequest violation; the message defaults to "<field> <description>"."""
    return request_error(
        reason,
        message if message is not None else f"{field} {description}",
        metadata={"field": field, **(metadata or {})},
        field_violations=(FieldViolation(field, description),),
    )
