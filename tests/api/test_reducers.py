"""Reducers over repeats chosen in the run spec, through the real server and the SDK:
each task reports pass@k (unbiased), pass^k, majority and mean over its records,
equal to their recomputation from the samples ListSamples returns; a spec the reducers
cannot apply to is refused with INVALID_ARGUMENT naming the field."""

from collections import defaultdict
from pathlib import Path
from typing import Any

import grpc
import pytest

from evald.v1 import enums_pb2, run_pb2, service_pb2
from evald_client import AsyncEvaldClient, InvalidArgument, Reducer, ReducerKind, RunState
from evald_server.domain import InvalidArgument as ServerInvalidArgument
from evald_server.engine import DatasetRef, ReducerSpec, RunSpec
from evald_server.engine._reducer_spec import MAX_REDUCERS
from evald_server.scoring import Reducer as ScoringReducer
from evald_server.scoring import majority_correct, pass_at_k, pass_hat_k
from tests._shared import simulated_model
from tests.api._support import assert_reason, fails, raw_stub
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

N = 24
REPEAT = 4
LETTERS = [
    {"question": f"q {i}", "choices": ["w", "x", "y", "z"], "answer_index": i % 4} for i in range(N)
]
ENTITIES = [{"text": f"Ada {i}", "entities": [{"text": "Ada", "type": "PER"}]} for i in range(3)]
SUMMARIES = [{"document": f"d {i}", "summary": "a b"} for i in range(3)]


async def _upload(client: AsyncEvaldClient) -> None:
    for name, task_type, records in [
        ("letters", "multiple_choice", LETTERS),
        ("entities", "ner", ENTITIES),
        ("summaries", "summarization", SUMMARIES),
    ]:
        await client.upload_dataset(
            name=name, version="1.0.0", task_type=task_type, records=records
        )


def _expected(samples: list[Any]) -> dict[str, float]:
    """Every reducer recomputed from the samples: grouped by record, in repeat order."""
    by_record: dict[str, list[Any]] = defaultdict(list)
    for sample in sorted(samples, key=lambda s: (s.record_id, s.repeat_index)):
        by_record[sample.record_id].append(sample)
    values: dict[str, list[float]] = defaultdict(list)
    for rows in by_record.values():
        correct = [s.scores["correct"] == 1.0 for s in rows]
        n, c = len(correct), sum(correct)
        values["pass@1"].append(pass_at_k(n, c, 1))
        values["pass@4"].append(pass_at_k(n, c, 4))
        values["pass^2"].append(pass_hat_k(n, c, 2))
        values["mean"].append(c / n)
        answers = [s.output.strip().upper()[:1] for s in rows]
        values["majority"].append(float(majority_correct(answers, correct)))
    return {name: sum(v) / len(v) for name, v in values.items()}


async def test_each_task_reports_the_reducers_it_was_asked_for(tmp_path: Path) -> None:
    models = [simulated_model("sim", latency_ms=0.0, accuracy=0.4, seed=3)]
    async with (
        running_server(make_config(tmp_path, models=models)) as address,
        AsyncEvaldClient(address) as client,
    ):
        await _upload(client)
        run = await client.create_run(
            models=["sim"],
            datasets=[("letters", "1.0.0")],
            repeat=REPEAT,
            reducers=["pass@1", "pass@4", Reducer(ReducerKind.PASS_HAT_K, 2), "majority", "mean"],
        )
        assert [r.name for r in run.spec.reducers] == [
            "pass@1",
            "pass@4",
            "pass^2",
            "majority",
            "mean",
        ]
        assert (await client.wait(run.run_id, timeout_s=120)).state is RunState.SUCCEEDED
        (result,) = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
        assert len(samples) == N * REPEAT
        expected = _expected(samples)
        reduced = {m.name: m for m in result.reduced}
        assert list(reduced) == ["pass@1", "pass@4", "pass^2", "majority", "mean"]
        for name, metric in reduced.items():
            assert metric.value == pytest.approx(expected[name]), name
            assert (metric.records, metric.records_skipped) == (N, 0), name
            assert metric.interval.lower <= metric.value <= metric.interval.upper, name
        # pass@1 is the mean and the per-sample accuracy; pass@4 of n = 4 is "any right"
        assert reduced["pass@1"].value == pytest.approx(result.metrics["accuracy"])
        assert reduced["pass@1"].value == pytest.approx(reduced["mean"].value)
        assert reduced["pass@4"].value > reduced["pass@1"].value > reduced["pass^2"].value
        # the run's spec keeps them (read back from the store)
        again = await client.get_run(run.run_id)
        assert again.spec.reducers == run.spec.reducers


async def test_a_run_without_reducers_reports_none(tmp_path: Path) -> None:
    models = [simulated_model("sim", latency_ms=0.0, accuracy=0.4, seed=3)]
    async with (
        running_server(make_config(tmp_path, models=models)) as address,
        AsyncEvaldClient(address) as client,
    ):
        await _upload(client)
        run = await client.create_run(models=["sim"], datasets=[("letters", "1.0.0")], repeat=2)
        assert (await client.wait(run.run_id, timeout_s=120)).state is RunState.SUCCEEDED
        (result,) = await client.results(run.run_id)
        assert result.reduced == ()


@pytest.mark.parametrize(
    ("dataset", "reducers", "repeat", "field", "words"),
    [
        ("letters", ["pass@5"], 4, "spec.reducers[0].k", "more than the run's repeat (4)"),
        ("letters", ["pass@0"], 4, "spec.reducers[0].k", "needs k"),
        ("letters", ["mean", "mean"], 4, "spec.reducers[1]", "listed twice"),
        ("letters", [Reducer(ReducerKind.MEAN, 2)], 4, "spec.reducers[0].k", "takes no k"),
        ("entities", ["pass@1", "majority"], 2, "spec.reducers[1]", "answer key"),
        ("summaries", ["mean"], 2, "spec.reducers[0]", "per-sample correct answer"),
    ],
)
async def test_reducers_that_cannot_apply_are_refused(
    tmp_path: Path,
    dataset: str,
    reducers: list[str | Reducer],
    repeat: int,
    field: str,
    words: str,
) -> None:
    models = [simulated_model("sim", latency_ms=0.0)]
    async with (
        running_server(make_config(tmp_path, models=models)) as address,
        AsyncEvaldClient(address) as client,
    ):
        await _upload(client)
        with pytest.raises(InvalidArgument) as info:
            await client.create_run(
                models=["sim"], datasets=[(dataset, "1.0.0")], repeat=repeat, reducers=reducers
            )
        assert info.value.reason == "RUN_SPEC_INVALID"
        assert [v.field for v in info.value.field_violations] == [field]
        assert words in info.value.field_violations[0].description
        assert [r async for r in client.list_runs()] == []


async def test_an_unset_or_unknown_reducer_kind_is_refused_naming_it(tmp_path: Path) -> None:
    models = [simulated_model("sim", latency_ms=0.0)]
    async with (
        running_server(make_config(tmp_path, models=models)) as address,
        AsyncEvaldClient(address) as client,
        raw_stub(address) as stub,
    ):
        await _upload(client)
        for kind in (enums_pb2.REDUCER_KIND_UNSPECIFIED, 99):
            spec = run_pb2.RunSpec(model_ids=["sim"], repeat=2)
            spec.datasets.add(name="letters", benchmark_version="1.0.0")
            spec.reducers.add(kind=kind, k=1)  # type: ignore[arg-type]
            failure = await fails(stub.CreateRun(service_pb2.CreateRunRequest(spec=spec)))
            assert_reason(failure, grpc.StatusCode.INVALID_ARGUMENT, "RUN_SPEC_INVALID")
            assert list(failure.violations) == ["spec.reducers[0].kind"]


def test_the_reducer_list_is_bounded_and_kept_in_the_stored_spec() -> None:
    ref = (DatasetRef("letters", "1.0.0"),)
    many = tuple(ReducerSpec(ScoringReducer.PASS_AT_K, 1) for _ in range(MAX_REDUCERS + 1))
    with pytest.raises(ServerInvalidArgument) as info:
        RunSpec(models=("sim",), datasets=ref, repeat=2, reducers=many)
    assert [v.field for v in info.value.field_violations] == ["reducers"]
    asked = (ReducerSpec(ScoringReducer.PASS_HAT_K, 2), ReducerSpec(ScoringReducer.MEAN))
    spec = RunSpec(models=("sim",), datasets=ref, repeat=2, reducers=asked)
    assert RunSpec.from_json(spec.to_json()) == spec
    # a spec without reducers keeps the body hash it had before they existed
    assert "reducers" not in RunSpec(models=("sim",), datasets=ref).to_json()
