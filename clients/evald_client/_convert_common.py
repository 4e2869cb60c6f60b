"""What every evald.v1 ⇄ SDK conversion shares: enums by name (an unknown value is
UNSPECIFIED), timestamps, durations, optional fields, flat messages copied by field
name, and the ``EvalError``.

The conversions are split by job — ``_convert_requests`` (request parts to proto),
``_convert_runs`` (datasets, models, runs, samples), ``_convert_events``,
``_convert_results`` and ``_convert_comparison`` — and nothing else in the SDK reads a
protobuf field.
"""

from dataclasses import fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar, cast

from google.protobuf import duration_pb2, timestamp_pb2

from evald.v1 import enums_pb2, errors_pb2, run_pb2
from evald_client._enums import (
    ErrorCategory,
    JudgeScoreFormat,
    ResultStatus,
    RunState,
    SubtaskState,
    TaskType,
)
from evald_client._errors import InternalError
from evald_client._models import Cost, EvalError, RetryCounts

_E = TypeVar("_E", bound=StrEnum)
_T = TypeVar("_T")

# The retry policy's per-class budgets, named alike in the proto and the SDK.
CLASS_BUDGETS = ("max_rate_limited_retries", "max_timeout_retries", "max_transient_retries")


def same_names(cls: type[_T], message: Any) -> _T:
    """``cls`` filled from the scalar proto fields of the same names (flat messages only;
    tests/client/test_convert.py converts a fully populated message of each)."""
    return cls(**{f.name: getattr(message, f.name) for f in fields(cls)})  # type: ignore[arg-type]


def enum_from_proto(cls: type[_E], wrapper: Any, value: int, prefix: str) -> _E:
    """The SDK member named like proto ``value`` without ``prefix``; unknown → UNSPECIFIED."""
    try:
        name = str(wrapper.Name(value)).removeprefix(prefix)
    except ValueError:  # a value newer than this client
        name = "UNSPECIFIED"
    return cls.__members__.get(name, cls.__members__["UNSPECIFIED"])


def enum_to_proto(member: StrEnum, wrapper: Any, prefix: str) -> Any:
    return wrapper.Value(prefix + member.name)


def task_type_to_proto(task_type: TaskType) -> enums_pb2.TaskType:
    return cast(enums_pb2.TaskType, enum_to_proto(task_type, enums_pb2.TaskType, "TASK_TYPE_"))


def run_state_to_proto(state: RunState) -> enums_pb2.RunState:
    return cast(enums_pb2.RunState, enum_to_proto(state, enums_pb2.RunState, "RUN_STATE_"))


def subtask_state_to_proto(state: SubtaskState) -> enums_pb2.SubtaskState:
    value = enum_to_proto(state, enums_pb2.SubtaskState, "SUBTASK_STATE_")
    return cast(enums_pb2.SubtaskState, value)


def category_to_proto(category: ErrorCategory) -> errors_pb2.ErrorCategory:
    value = enum_to_proto(category, errors_pb2.ErrorCategory, "ERROR_CATEGORY_")
    return cast(errors_pb2.ErrorCategory, value)


def reason_to_proto(reason: str) -> errors_pb2.ErrorReason:
    """An ErrorReason by the name errors carry (``PROVIDER_RATE_LIMITED``; any case).

    Raises ``ValueError`` for a name this client's contract does not know."""
    name = reason.strip().upper().removeprefix("ERROR_REASON_")
    try:
        return cast(errors_pb2.ErrorReason, errors_pb2.ErrorReason.Value("ERROR_REASON_" + name))
    except ValueError:
        raise ValueError(f"unknown error reason {reason!r}") from None


def task_type_from_proto(value: int) -> TaskType:
    return enum_from_proto(TaskType, enums_pb2.TaskType, value, "TASK_TYPE_")


def timestamp(message: Any, field: str) -> datetime | None:
    """The field as an aware datetime; a server's timestamp outside what a datetime holds
    (years 1-9999) is an ``InternalError`` naming the field, not a ``ValueError``."""
    if not message.HasField(field):
        return None
    stamp: timestamp_pb2.Timestamp = getattr(message, field)
    try:
        return stamp.ToDatetime(tzinfo=UTC)
    except (ValueError, OverflowError) as exc:
        raise InternalError(
            f"the server sent an invalid timestamp in {type(message).__name__}.{field} "
            f"(seconds {stamp.seconds}, nanos {stamp.nanos})",
            code="INTERNAL",
        ) from exc


def seconds(value: duration_pb2.Duration) -> float:
    return value.seconds + value.nanos / 1e9


def duration(total_s: float) -> duration_pb2.Duration:
    message = duration_pb2.Duration()
    message.FromNanoseconds(round(total_s * 1e9))
    return message


def optional(message: Any, field: str) -> Any:
    return getattr(message, field) if message.HasField(field) else None


def run_state_from_proto(value: int) -> RunState:
    return enum_from_proto(RunState, enums_pb2.RunState, value, "RUN_STATE_")


def result_status_from_proto(value: int) -> ResultStatus:
    return enum_from_proto(ResultStatus, enums_pb2.ResultStatus, value, "RESULT_STATUS_")


def eval_error_from_proto(message: errors_pb2.EvalError) -> EvalError:
    try:
        reason = errors_pb2.ErrorReason.Name(message.reason).removeprefix("ERROR_REASON_")
    except ValueError:  # a reason newer than this client; the category still says who acts
        reason = f"UNKNOWN_{message.reason}"
    return EvalError(
        category=enum_from_proto(
            ErrorCategory, errors_pb2.ErrorCategory, message.category, "ERROR_CATEGORY_"
        ),
        reason=reason,
        message=message.message,
        retryable=message.retryable,
        http_equivalent=message.http_equivalent,
        metadata=dict(message.metadata),
    )


def cost_from_proto(message: run_pb2.Cost) -> Cost:
    return Cost(
        cost_usd=message.cost_usd,
        tokens=message.tokens,
        estimated=message.estimated,
        priced=message.priced,
    )


def retry_counts_from_proto(message: run_pb2.RetryCounts) -> RetryCounts:
    return RetryCounts(
        rate_limited=message.rate_limited, timeout=message.timeout, transient=message.transient
    )


def judge_score_format_from_proto(value: int) -> JudgeScoreFormat:
    return enum_from_proto(
        JudgeScoreFormat, enums_pb2.JudgeScoreFormat, value, "JUDGE_SCORE_FORMAT_"
    )
