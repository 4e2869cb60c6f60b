"""Domain enums ⇄ evald.v1 proto enums, by member name.

Proto enum values carry their type's prefix (``TASK_TYPE_QA``); domain members do not
(``TaskType.QA``). A contract test checks both sides have the same members.
"""

from enum import Enum
from typing import Any, TypeVar

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from evald.v1 import comparison_pb2, enums_pb2, errors_pb2, sample_pb2
from evald_server.comparison import PairedTest, TaskPairing
from evald_server.domain import (
    ChoiceContinuation,
    ChoiceScoring,
    ErrorCategory,
    ErrorReason,
    FinishReason,
    JudgeScoreFormat,
    PromptFormat,
    ResultStatus,
    RunState,
    ShotFormat,
    SubtaskState,
    TaskState,
    TaskType,
)
from evald_server.scoring import Reducer

E = TypeVar("E", bound=Enum)

_PROTO_ENUMS: dict[type[Enum], tuple[EnumTypeWrapper, str]] = {
    TaskType: (enums_pb2.TaskType, "TASK_TYPE_"),
    SubtaskState: (enums_pb2.SubtaskState, "SUBTASK_STATE_"),
    TaskState: (enums_pb2.TaskState, "TASK_STATE_"),
    RunState: (enums_pb2.RunState, "RUN_STATE_"),
    ResultStatus: (enums_pb2.ResultStatus, "RESULT_STATUS_"),
    ErrorCategory: (errors_pb2.ErrorCategory, "ERROR_CATEGORY_"),
    ErrorReason: (errors_pb2.ErrorReason, "ERROR_REASON_"),
    PairedTest: (comparison_pb2.PairedTest, "PAIRED_TEST_"),
    TaskPairing: (comparison_pb2.TaskPairing, "TASK_PAIRING_"),
    ShotFormat: (enums_pb2.ShotFormat, "SHOT_FORMAT_"),
    ChoiceScoring: (enums_pb2.ChoiceScoring, "CHOICE_SCORING_"),
    ChoiceContinuation: (enums_pb2.ChoiceContinuation, "CHOICE_CONTINUATION_"),
    PromptFormat: (enums_pb2.PromptFormat, "PROMPT_FORMAT_"),
    JudgeScoreFormat: (enums_pb2.JudgeScoreFormat, "JUDGE_SCORE_FORMAT_"),
    FinishReason: (sample_pb2.FinishReason, "FINISH_REASON_"),
    Reducer: (enums_pb2.ReducerKind, "REDUCER_KIND_"),
}


def to_proto_enum(member: Enum) -> Any:
    """The proto value of a domain enum member."""
    wrapper, prefix = _PROTO_ENUMS[type(member)]
    return wrapper.Value(prefix + member.name)


def from_proto_enum(enum_type: type[E], value: int) -> E | None:
    """The domain member for a proto value; None for ``*_UNSPECIFIED`` or an unknown value."""
    wrapper, prefix = _PROTO_ENUMS[enum_type]
    try:
        name = wrapper.Name(value)
    except ValueError:
        return None
    member_name = name.removeprefix(prefix)
    return enum_type.__members__.get(member_name)
