"""The vocabulary every layer of the server shares: enums, errors, records."""

from evald_server.domain._enums import (
    ChoiceScoring,
    ErrorCategory,
    ErrorReason,
    ResultStatus,
    RunState,
    ShotFormat,
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
    "ChoiceScoring",
    "DatasetInvalid",
    "ErrorCategory",
    "ErrorReason",
    "EvalError",
    "EvaldError",
    "FailedPrecondition",
    "FieldViolation",
    "InvalidArgument",
    "NotFound",
    "OutOfRange",
    "ResourceExhausted",
    "ResultStatus",
    "RunState",
    "ShotFormat",
    "SubtaskState",
    "TaskState",
    "TaskType",
    "Unauthenticated",
]
