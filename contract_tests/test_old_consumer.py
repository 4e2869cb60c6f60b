"""Consumers built against a released contract read what today's server writes.

An old consumer is simulated with the descriptors of a baseline image, loaded into a
descriptor pool of its own: its classes know only the fields of that release.
"""

from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.descriptor import FileDescriptor
from google.protobuf.message import Message

from contract_tests._producer import build_fixtures
from contract_tests._support import BASELINES, baseline_pool
from evald.v1 import enums_pb2, result_pb2

TODAY = {
    name: message
    for name, message in build_fixtures().items()
    if message.DESCRIPTOR.full_name.startswith("evald.v1.")
}


def _old_class(image: Path, full_name: str) -> type[Message]:
    return message_factory.GetMessageClass(baseline_pool(image).FindMessageTypeByName(full_name))


def _is_subset(old: Any, new: Any) -> bool:
    """Whether every value the old consumer sees is the value today's code wrote."""
    if isinstance(old, dict):
        return isinstance(new, dict) and all(
            key in new and _is_subset(value, new[key]) for key, value in old.items()
        )
    if isinstance(old, list):
        return (
            isinstance(new, list)
            and len(old) == len(new)
            and all(_is_subset(a, b) for a, b in zip(old, new, strict=True))
        )
    return bool(old == new)


def test_there_is_a_baseline() -> None:
    assert [path.name for path in BASELINES][:1] == ["evald-v1.0.0.binpb"]


def _known(image: Path, full_name: str) -> bool:
    try:
        baseline_pool(image).FindMessageTypeByName(full_name)
    except KeyError:
        return False
    return True


# Every (release, message) pair where that release's consumers can receive the message:
# one added later (CompareRunsResponse, say) answers an RPC they cannot call.
READERS = [
    pytest.param(image, name, id=f"{name}-{image.stem}")
    for image in BASELINES
    for name in sorted(TODAY)
    if _known(image, TODAY[name].DESCRIPTOR.full_name)
]


def test_every_message_has_a_consumer_of_the_newest_release() -> None:
    newest = {p.values[1] for p in READERS if p.values[0] == BASELINES[-1]}
    assert newest == set(TODAY)


@pytest.mark.parametrize(("image", "name"), READERS)
def test_old_consumer_reads_todays_message(image: Path, name: str) -> None:
    today = TODAY[name]
    old = _old_class(image, today.DESCRIPTOR.full_name).FromString(today.SerializeToString())
    # It sees the values it knows (an enum value newer than it, such as a new task type,
    # as its number: compare enums by number)...
    seen = json_format.MessageToDict(old, use_integers_for_enums=True)
    assert seen
    assert _is_subset(seen, json_format.MessageToDict(today, use_integers_for_enums=True))
    # ...and passing the message on loses nothing, unknown fields included.
    assert type(today).FromString(old.SerializeToString()) == today


def _file_protos(file: FileDescriptor) -> list[descriptor_pb2.FileDescriptorProto]:
    """``file`` and its transitive imports as FileDescriptorProtos, imports first."""
    ordered: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def visit(current: FileDescriptor) -> None:
        if current.name in seen:
            return
        seen.add(current.name)
        for dependency in current.dependencies:
            visit(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        current.CopyToProto(proto)
        ordered.append(proto)

    visit(file)
    return ordered


_FIELD = descriptor_pb2.FieldDescriptorProto


def _future_pool() -> descriptor_pool.DescriptorPool:
    """Today's contract plus what a later minor version might add: a task type with its
    payload member, and a field on the shell."""
    pool = descriptor_pool.DescriptorPool()
    for proto in _file_protos(result_pb2.DESCRIPTOR):
        if proto.name == "evald/v1/enums.proto":
            task_type = next(e for e in proto.enum_type if e.name == "TaskType")
            task_type.value.add(name="TASK_TYPE_FUTURE", number=99)
        if proto.name == "evald/v1/result.proto":
            payload = proto.message_type.add(name="FuturePayload")
            payload.field.add(name="score", number=1, type=_FIELD.TYPE_DOUBLE)
            shell = next(m for m in proto.message_type if m.name == "TaskEvaluationResult")
            oneof_index = [o.name for o in shell.oneof_decl].index("payload")
            shell.field.add(
                name="future",
                number=99,
                type=_FIELD.TYPE_MESSAGE,
                type_name=".evald.v1.FuturePayload",
                oneof_index=oneof_index,
            )
            shell.field.add(name="future_note", number=98, type=_FIELD.TYPE_STRING)
        pool.Add(proto)
    return pool


@pytest.mark.parametrize("image", BASELINES, ids=[path.stem for path in BASELINES])
def test_old_consumer_keeps_what_a_newer_producer_added(image: Path) -> None:
    future_pool = _future_pool()
    future_cls = message_factory.GetMessageClass(
        future_pool.FindMessageTypeByName("evald.v1.TaskEvaluationResult")
    )
    produced = future_cls.FromString(TODAY["result_qa"].SerializeToString())
    produced.task_type = 99  # type: ignore[attr-defined]
    produced.future.score = 0.5  # type: ignore[attr-defined]
    produced.future_note = "from a later minor version"  # type: ignore[attr-defined]

    old = _old_class(image, "evald.v1.TaskEvaluationResult").FromString(
        produced.SerializeToString()
    )
    # The shell reads as before; the unknown payload member shows as "no payload" and
    # the unknown task type as its number (proto3 enums are open).
    assert old.WhichOneof("payload") is None
    assert old.task_type == 99  # type: ignore[attr-defined]
    assert old.task_type != enums_pb2.TASK_TYPE_QA  # type: ignore[attr-defined]
    assert old.metrics_summary["accuracy"] == 0.75  # type: ignore[attr-defined]
    assert old.execution_profile.latency_p99_ms == 180.5  # type: ignore[attr-defined]
    # Unknown fields survive the old consumer re-encoding the message.
    assert future_cls.FromString(old.SerializeToString()) == produced
