"""Generated requests for every RPC of ``evald.v1.EvaluationService``, through a real
server: whatever a client sends, the answer is OK or a graded error (a code other than
INTERNAL / UNKNOWN, with an ErrorInfo reason), and a refused request stores nothing.

The request strategies are built by walking the message descriptors, so a field added
to any request message is generated without touching this file. Every field gets
arbitrary values of its type (edge integers, NaN and infinities, unknown enum numbers,
unicode text, bytes, nested messages, map entries), mixed with values that reach past
the first lookup: the ids, names and page tokens of a seeded run and dataset. Uploads
also get arbitrary JSONL bodies in arbitrary chunks.
"""

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor, MethodDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evald.v1 import dataset_pb2, enums_pb2, run_pb2, service_pb2, service_pb2_grpc
from evald_client import EvaldClient, RetryPolicy
from evald_server.domain import TaskType
from tests._shared import classification_records, status_of
from tests.harness import ServerProcess
from tests.reliability._support import db_path, dump, query, release, server_config
from tests.reliability.test_fuzz import _valid_records, bodies

SERVICE = service_pb2.DESCRIPTOR.services_by_name["EvaluationService"]
METHODS = list(SERVICE.methods)
NEVER = {"INTERNAL", "UNKNOWN", "DATA_LOSS", "UNIMPLEMENTED"}
MAX_DEPTH = 3  # nested messages below the request
F = FieldDescriptor
_TASK_TYPES = {t: enums_pb2.TaskType.Value(f"TASK_TYPE_{t.name}") for t in TaskType}

_INT_RANGES = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_FIXED64: (0, 2**64 - 1),
}


@dataclass(frozen=True)
class World:
    """A server with a finished run (some samples failed for good) and its dataset."""

    address: str
    db: Path
    stub: Any
    known: dict[str, tuple[str, ...]]  # field name → values that exist (ids, tokens …)
    bases: dict[str, tuple[Any, ...]]  # method → valid requests to mutate


def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    edges = [v for v in (0, 1, -1, 2, low, high, 10**9, -(10**9), 10**18) if low <= v <= high]
    return st.one_of(st.sampled_from(edges), st.integers(low, high))


def _text(field: FieldDescriptor, world: World) -> st.SearchStrategy[str]:
    arbitrary = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
    anything_known = st.sampled_from(sorted({v for vs in world.known.values() for v in vs}))
    choices = [anything_known, arbitrary, st.just("")]
    if field.name in world.known:
        choices.insert(0, st.sampled_from(world.known[field.name]))
    return st.one_of(*choices)


def _scalar(field: FieldDescriptor, world: World) -> st.SearchStrategy[Any]:
    if field.type == F.TYPE_STRING:
        return _text(field, world)
    if field.type == F.TYPE_BYTES:
        return st.binary(max_size=200)
    if field.type == F.TYPE_BOOL:
        return st.booleans()
    if field.type == F.TYPE_DOUBLE:
        return st.floats()
    if field.type == F.TYPE_FLOAT:
        return st.floats(width=32)
    if field.type == F.TYPE_ENUM:
        numbers = [v.number for v in field.enum_type.values]
        return st.one_of(st.sampled_from(numbers), _integers(-(2**31), 2**31 - 1))
    return _integers(*_INT_RANGES[field.type])


def _value(field: FieldDescriptor, world: World, depth: int) -> st.SearchStrategy[Any]:
    if field.type == F.TYPE_MESSAGE:
        return messages(field.message_type, world, depth + 1)
    return _scalar(field, world)


def _is_map(field: FieldDescriptor) -> bool:
    return field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def messages(descriptor: Descriptor, world: World, depth: int = 0) -> st.SearchStrategy[Any]:
    """Messages of ``descriptor`` with any subset of fields set to arbitrary values."""
    cls = message_factory.GetMessageClass(descriptor)

    @st.composite
    def build(draw: st.DrawFn) -> Any:
        message = cls()
        if depth > MAX_DEPTH:
            return message
        for field in descriptor.fields:
            if not draw(st.booleans()):
                continue
            target = getattr(message, field.name)
            if _is_map(field):
                key_field, value_field = field.message_type.fields
                entries = draw(
                    st.dictionaries(
                        _scalar(key_field, world), _value(value_field, world, depth), max_size=3
                    )
                )
                for key, value in entries.items():
                    if value_field.type == F.TYPE_MESSAGE:
                        target[key].CopyFrom(value)
                    else:
                        target[key] = value
            elif field.is_repeated:
                items = draw(st.lists(_value(field, world, depth), max_size=3))
                if field.type == F.TYPE_MESSAGE:
                    for item in items:
                        target.add().CopyFrom(item)
                else:
                    target.extend(items)
            elif field.type == F.TYPE_MESSAGE:
                target.CopyFrom(draw(_value(field, world, depth)))
            else:
                setattr(message, field.name, draw(_value(field, world, depth)))
        return message

    return build()


def _only(message: Any, fields: set[str]) -> Any:
    kept = type(message)()
    kept.CopyFrom(message)
    for field in message.DESCRIPTOR.fields:
        if field.name not in fields:
            kept.ClearField(field.name)
    return kept


@st.composite
def mutated(draw: st.DrawFn, base: Any, world: World) -> Any:
    """A valid request with some of its fields replaced by generated values (or unset):
    reaches the checks behind the first lookup, e.g. a forged token for a real run."""
    generated = draw(messages(base.DESCRIPTOR, world))
    names = [f.name for f in base.DESCRIPTOR.fields]
    replaced = draw(st.sets(st.sampled_from(names), max_size=2)) if names else set()
    keep = set(names) - replaced
    request = type(base)()
    request.MergeFrom(_only(base, keep))
    request.MergeFrom(_only(generated, set(names) - keep))
    return request


def requests(method: MethodDescriptor, world: World) -> st.SearchStrategy[Any]:
    arbitrary = messages(method.input_type, world)
    bases = world.bases.get(method.name, ())
    if not bases:
        return arbitrary
    return st.one_of(arbitrary, st.sampled_from(bases).flatmap(lambda b: mutated(b, world)))


@st.composite
def hostile_lines(draw: st.DrawFn, task_type: TaskType) -> bytes:
    """A valid record's JSON text with what plain ``json.loads`` lets through spliced in:
    a lone surrogate, a duplicate key, a number beyond a double, deep nesting."""
    record = draw(_valid_records(task_type))
    text = json.dumps(record)[:-1]  # open: more members follow
    depth = draw(st.sampled_from([10, 64, 65, 900]))
    key = draw(st.sampled_from(sorted(record)))
    member = draw(
        st.sampled_from(
            [
                f', "metadata": {{"k": "x\\u{draw(st.integers(0xD800, 0xDFFF)):04x}"}}',
                f', "id": "\\u{draw(st.integers(0xD800, 0xDFFF)):04x}"',
                f", {json.dumps(key)}: {json.dumps(record[key])}",
                ', "metadata": {"x": 1e400}',
                ', "metadata": {"x": [-1e999]}',
                ', "metadata": ' + '{"a": ' * depth + "1" + "}" * depth,
                ', "metadata": ' + "[" * depth + "]" * depth,
            ]
        )
    )
    return (text + member + "}").encode()


@st.composite
def upload_streams(draw: st.DrawFn, world: World) -> list[Any]:
    """Arbitrary UploadDataset streams: generated messages in any order, or a header
    (mostly one that passes) followed by an arbitrary JSONL body in arbitrary chunks."""
    descriptor = service_pb2.UploadDatasetRequest.DESCRIPTOR
    if draw(st.integers(0, 3)) == 0:
        return draw(st.lists(messages(descriptor, world), max_size=4))
    task_type = draw(st.sampled_from(list(TaskType)))
    valid = dataset_pb2.UploadDatasetHeader(
        name="fuzz", benchmark_version="1.0.0", task_type=_TASK_TYPES[task_type]
    )
    header = draw(
        st.one_of(st.just(valid), mutated(valid, world), messages(valid.DESCRIPTOR, world))
    )
    body = draw(
        st.one_of(
            bodies(task_type),
            st.binary(max_size=2000),
            st.lists(hostile_lines(task_type), min_size=1, max_size=3).map(b"\n".join),
        )
    )
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=3)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    return [
        service_pb2.UploadDatasetRequest(header=header),
        *(service_pb2.UploadDatasetRequest(chunk=piece) for piece in pieces),
    ]


_POSITIONS = (
    *("[1" + "0" * n + "]" for n in (30, 400)),
    *("[1" + "0" * n + ', "x"]' for n in (30, 400)),
    '[1e400, "x"]',
    '[-1e400, "x"]',
    '[true, "x"]',
    "[-1]",
    "[1e400]",
    "[0.5]",
    '["x"]',
    "[]",
    "[true]",
    "{}",
)


def _forged(token: str) -> list[str]:
    """A real token with its position replaced: huge, infinite, negative, wrong type."""
    body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    forged = []
    for position in _POSITIONS:
        text = json.dumps({**body, "p": None}).replace("null", position)
        forged.append(base64.urlsafe_b64encode(text.encode()).decode().rstrip("="))
    return forged


_LIVE = "SELECT run_id FROM runs WHERE state IN ('pending', 'running')"


def _quiescent(world: World, timeout_s: float = 60.0) -> None:
    """End every live run, so that the store only changes by our requests. A generated
    run may wait for retries as long as its generated backoff: cancelled, it ends once
    its calls in flight (0.5 ms each) have, and the deadline bounds only a hang."""
    for (run_id,) in query(world.db, _LIVE):
        world.stub.CancelRun(service_pb2.CancelRunRequest(run_id=run_id), timeout=30)
    deadline = time.monotonic() + timeout_s
    while query(world.db, _LIVE):
        assert time.monotonic() < deadline, "a cancelled run did not end"
        time.sleep(0.02)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp_path = tmp_path_factory.mktemp("request-fuzz")
    models = [
        {"id": "sim", "provider": "simulated", "simulator": {"latency_ms_median": 0.5}},
        {
            "id": "sim-flaky",
            "provider": "simulated",
            "simulator": {"latency_ms_median": 0.5, "fault_rate": 0.3, "seed": 3},
        },
    ]
    limits = {"max_records_per_dataset": 20, "max_record_bytes": 16_384, "max_subtasks_per_run": 60}
    server = ServerProcess(server_config(tmp_path, models, limits=limits))
    try:
        address = server.start()
        with EvaldClient(address) as client:
            dataset = client.upload_dataset(
                name="base",
                version="1.0.0",
                task_type="classification",
                records=classification_records(6),
            )
            run = client.create_run(
                models=["sim", "sim-flaky"],
                datasets=[("base", "1.0.0")],
                retry_policy=RetryPolicy(max_retries=0, backoff_s=(0.01,)),
            )
            run = client.wait(run.run_id, timeout_s=60)
            # A second dataset and run, so that every listing has a second page.
            client.upload_dataset(
                name="other",
                version="1.0.0",
                task_type="classification",
                records=classification_records(2),
            )
            second = client.create_run(models=["sim"], datasets=[("other", "1.0.0")])
            client.wait(second.run_id, timeout_s=60)
        with grpc.insecure_channel(address) as channel:
            stub = service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
            runs_token = stub.ListRuns(service_pb2.ListRunsRequest(page_size=1)).next_page_token
            datasets_token = stub.ListDatasets(
                service_pb2.ListDatasetsRequest(page_size=1)
            ).next_page_token
            samples_token = stub.ListSamples(
                service_pb2.ListSamplesRequest(run_id=run.run_id, page_size=1)
            ).next_page_token
            tokens = [runs_token, datasets_token, samples_token]
            assert all(tokens), "the seeded listings have a second page"
            task_ids = tuple(t.task_id for t in run.progress.tasks)
            known = {
                "run_id": (run.run_id,),
                "task_id": task_ids,
                "task_ids": task_ids,
                "dataset_id": (dataset.dataset_id,),
                "name": ("base", "fuzz"),
                "benchmark_version": ("1.0.0",),
                "model_ids": ("sim", "sim-flaky"),
                "request_id": ("req-1",),
                "page_token": (*tokens, *(f for t in tokens for f in _forged(t))),
            }
            forged = {t: [t, *_forged(t)] for t in tokens}
            ref = dataset_pb2.DatasetRef(name="base", benchmark_version="1.0.0")
            spec = run_pb2.RunSpec(model_ids=["sim"], datasets=[ref])
            s = service_pb2
            bases: dict[str, tuple[Any, ...]] = {
                "ListModels": (s.ListModelsRequest(),),
                "GetDataset": (
                    s.GetDatasetRequest(dataset_id=dataset.dataset_id),
                    s.GetDatasetRequest(ref=ref),
                ),
                "ListDatasets": (s.ListDatasetsRequest(page_size=1, page_token=datasets_token),),
                "CreateRun": (s.CreateRunRequest(spec=spec, request_id="req-1"),),
                "GetRun": (s.GetRunRequest(run_id=run.run_id),),
                "ListRuns": tuple(
                    s.ListRunsRequest(page_size=1, page_token=t) for t in forged[runs_token]
                ),
                "CancelRun": (s.CancelRunRequest(run_id=run.run_id),),
                "RetryRun": (s.RetryRunRequest(run_id=run.run_id),),
                "WatchRun": (s.WatchRunRequest(run_id=run.run_id),),
                "ListResults": (s.ListResultsRequest(run_id=run.run_id),),
                "ListSamples": tuple(
                    s.ListSamplesRequest(run_id=run.run_id, page_size=1, page_token=t)
                    for t in forged[samples_token]
                ),
            }
            yield World(address, db_path(tmp_path), stub, known, bases)
    finally:
        server.kill()
        release(server)
    assert "unexpected error" not in server.stderr(), server.stderr()


def _call(world: World, method: MethodDescriptor, data: st.DataObject) -> None:
    rpc = getattr(world.stub, method.name)
    if method.client_streaming:
        request: Any = data.draw(upload_streams(world), label="stream")
        call = lambda: rpc(iter(request), timeout=30)  # noqa: E731
    else:
        request = data.draw(requests(method, world), label="request")
        if method.server_streaming:
            call = lambda: list(rpc(request, timeout=30))  # noqa: E731
        else:
            call = lambda: rpc(request, timeout=30)  # noqa: E731
    _quiescent(world)
    before = dump(world.db)
    refused: grpc.RpcError | None = None
    try:
        call()
    except grpc.RpcError as error:
        refused = error
    if refused is not None:
        code, reason = status_of(refused)
        assert code not in NEVER, (code, reason, refused.details())
        assert reason, f"{code} without an ErrorInfo reason: {refused.details()}"
        assert dump(world.db) == before, "a refused request changed the store"


_FIXTURE_OK = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


def test_every_request_message_of_the_service_is_generated() -> None:
    names = {m.name for m in METHODS}
    assert names >= {"CreateRun", "UploadDataset", "ListSamples", "RetryRun", "WatchRun"}
    assert {m.input_type.full_name for m in METHODS} == {
        f"evald.v1.{m.name}Request" for m in METHODS
    }


@pytest.mark.parametrize("method", METHODS, ids=[m.name for m in METHODS])
@settings(max_examples=40, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(data=st.data())
def test_generated_requests_get_a_graded_answer(
    world: World, method: MethodDescriptor, data: st.DataObject
) -> None:
    _call(world, method, data)


@pytest.mark.slow
@pytest.mark.parametrize("method", METHODS, ids=[m.name for m in METHODS])
@settings(max_examples=300, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(data=st.data())
def test_many_more_generated_requests(
    world: World, method: MethodDescriptor, data: st.DataObject
) -> None:
    _call(world, method, data)
