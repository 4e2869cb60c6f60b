"""Every evald.v1 enum mirrors its domain enum member by member, so the API maps by name.

The proto value of domain member ``TaskType.QA`` is ``TASK_TYPE_QA``; value 0 is
``TASK_TYPE_UNSPECIFIED`` and has no domain member.
"""

import re
from enum import Enum

import pytest
from google.protobuf.descriptor import EnumDescriptor

from contract_tests._support import evald_enums
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

MIRRORED: list[tuple[type[Enum], EnumDescriptor]] = [
    (TaskType, enums_pb2.TaskType.DESCRIPTOR),
    (SubtaskState, enums_pb2.SubtaskState.DESCRIPTOR),
    (TaskState, enums_pb2.TaskState.DESCRIPTOR),
    (RunState, enums_pb2.RunState.DESCRIPTOR),
    (ResultStatus, enums_pb2.ResultStatus.DESCRIPTOR),
    (ErrorCategory, errors_pb2.ErrorCategory.DESCRIPTOR),
    (ErrorReason, errors_pb2.ErrorReason.DESCRIPTOR),
    (PairedTest, comparison_pb2.PairedTest.DESCRIPTOR),
    (TaskPairing, comparison_pb2.TaskPairing.DESCRIPTOR),
    (ShotFormat, enums_pb2.ShotFormat.DESCRIPTOR),
    (ChoiceScoring, enums_pb2.ChoiceScoring.DESCRIPTOR),
    (ChoiceContinuation, enums_pb2.ChoiceContinuation.DESCRIPTOR),
    (PromptFormat, enums_pb2.PromptFormat.DESCRIPTOR),
    (JudgeScoreFormat, enums_pb2.JudgeScoreFormat.DESCRIPTOR),
    (FinishReason, sample_pb2.FinishReason.DESCRIPTOR),
    (Reducer, enums_pb2.ReducerKind.DESCRIPTOR),
]
# Enums that exist only on the wire: they describe results, not server state.
PROTO_ONLY = {"evald.v1.IntervalMethod"}


def _prefix(enum: EnumDescriptor) -> str:
    """TaskType -> TASK_TYPE_ (buf's ENUM_VALUE_PREFIX rule)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


@pytest.mark.parametrize(
    ("domain", "proto"), MIRRORED, ids=[domain.__name__ for domain, _ in MIRRORED]
)
def test_proto_enum_has_exactly_the_domain_members(
    domain: type[Enum], proto: EnumDescriptor
) -> None:
    prefix = _prefix(proto)
    assert proto.values_by_number[0].name == f"{prefix}UNSPECIFIED"
    wire = {value.name.removeprefix(prefix) for value in proto.values if value.number != 0}
    assert wire == {member.name for member in domain}


def test_every_proto_enum_is_mirrored_or_declared_proto_only() -> None:
    enums = {enum.full_name for enum in evald_enums()}
    mirrored = {proto.full_name for _, proto in MIRRORED}
    assert enums == mirrored | PROTO_ONLY
