"""The vocabulary every layer of the server shares: enums, errors, records."""

from evald_server.domain._enums import (
    ErrorCategory,
    ErrorReason,
    FinishReason,
    ResultStatus,
    RunState,
    SubtaskState,
    TaskState,
    TaskType,
)
from evald_server.domain._errors import (
    AlreadyExists,
    DatasetInvalid,
    EvaldError,
    EvalError,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    OutOfRange,
    ResourceExhausted,
    Unauthenticated,
)

__all__ = [
    "AlreadyExists",
    "DatasetInvalid",
    "ErrorCategory",
    "ErrorReason",
    "EvalError",
    "EvaldError",
    "FailedPrecondition",
    "FieldViolation",
    "FinishReason",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "ResourceExhausted",
    "ResultStatus",
    "RunState",
    "SubtaskState",
    "TaskState",
    "TaskType",
    "Unauthenticated",
]
