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

Anything else raised inside a handler is a bug: logged with its traceback and answered
INTERNAL without details.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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

    def __init__(
        self,
        reason: ErrorReason,
        message: str,
        *,
        metadata: Mapping[str, object] | None = None,
        field_violations: tuple[FieldViolation, ...] = (),
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.metadata: dict[str, str] = {k: str(v) for k, v in (metadata or {}).items()}
        self.field_violations = field_violations
        self.retry_after_s = retry_after_s

    @property
    def category(self) -> ErrorCategory:
        return mapping_for(self.reason).category

    def to_eval_error(self) -> EvalError:
        return EvalError.of(self.reason, self.message, **self.metadata)


class InvalidArgument(EvaldError):
    """A request field is malformed or out of range."""


class DatasetInvalid(InvalidArgument):
    """An uploaded dataset has a bad record; metadata names the line and the field."""


class NotFound(EvaldError):
    """The named object does not exist, or belongs to another tenant."""


class AlreadyExists(EvaldError):
    """An immutable object exists with different content (dataset version, request_id)."""


class FailedPrecondition(EvaldError):
    """The object is not in a state that allows the operation (e.g. retrying a live run)."""


class ResourceExhausted(EvaldError):
    """A configured limit would be exceeded; metadata names the limit and its value."""


class OutOfRange(EvaldError):
    """A cursor points before what is retained (a WatchRun after_seq that has expired)."""


class Unauthenticated(EvaldError):
    """The bearer token is missing or unknown."""
