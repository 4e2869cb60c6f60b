"""RescoreRun through the real server, the SDK and the fake provider: a finished run's
stored answers scored again as a new run — with no provider request (the fake's
journal), its provenance naming the source, CompareRuns pairing the two — and the
refusals: unknown run, run not finished, bad settings. After a restart between the
store's copy and the scoring, the rescored run is scored on the next start."""

import hashlib
from pathlib import Path

import anyio
import grpc
import pytest

from evald.v1 import run_pb2, service_pb2
from evald_client import (
    AlreadyExists,
    AsyncEvaldClient,
    ChoiceScoring,
    FailedPrecondition,
    InvalidArgument,
    MultipleChoicePayload,
    NotFound,
    RunState,
)
from evald_server.app import DatasetHeader, Evald, RescoreSettings
from evald_server.config import parse_config
from evald_server.domain import RunState as ServerRunState
from evald_server.domain import TaskType
from evald_server.engine import DatasetRef, Engine, ReducerSpec, RunSpec
from evald_server.fake_provider import FakeChatRequest, FakeConfig, FakeProvider
from evald_server.scoring import Reducer as ScoringReducer
from tests._postgres import new_database, pg_url
from tests._shared import jsonl, simulated_model
from tests.api._support import assert_reason, fails, raw_stub
from tests.api.test_benchmark_prompts import _QUESTION, mc_records
from tests.api.test_benchmark_prompts import _upload as upload_benchmarks
from tests.engine._support import TENANT, InlineScoring, wait_until_finished
from tests.harness import config_data, make_config, running_server

pytestmark = pytest.mark.anyio
__all__ = ["pg_url"]  # the fixture

N = 12
REPEAT = 3
RECORDS = [{"question": f"Where is sight {i}?", "answers": ["Paris"]} for i in range(N)]
# Right in its SQuAD-normalised form ("paris." is "paris"), or wrong.
ANSWERS = ("Paris", "paris.", "Lyon")


def _answer(chat: FakeChatRequest) -> str:
    """A fixed answer per subtask (its key names the record and the repeat)."""
    digest = hashlib.blake2b((chat.key or chat.last_content).encode(), digest_size=2).digest()
    return ANSWERS[int.from_bytes(digest, "big") % len(ANSWERS)]


async def _source_run(client: AsyncEvaldClient) -> str:
    await client.upload_dataset(name="sights", version="1.0.0", task_type="qa", records=RECORDS)
    run = await client.create_run(
        models=["m1"], datasets=[("sights", "1.0.0")], repeat=REPEAT, reducers=["pass@1"]
    )
    assert (await client.wait(run.run_id, timeout_s=60)).state is RunState.SUCCEEDED
    return run.run_id


async def test_a_rescore_scores_the_stored_answers_again_without_a_provider_call(
    tmp_path: Path,
) -> None:
    async with FakeProvider(FakeConfig(), answer=_answer) as fake:
        config = make_config(tmp_path, models=[fake.model_config("m1").model_dump()])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            source_id = await _source_run(client)
            asked = len(list(fake.journal.entries))
            assert asked == N * REPEAT
            run = await client.rescore_run(
                source_id, reducers=["pass@1", "pass@3", "majority"], request_id="rs-1"
            )
            assert run.rescored_from_run_id == source_id
            assert (run.spec.repeat, run.spec.model_ids) == (REPEAT, ("m1",))
            assert [r.name for r in run.spec.reducers] == ["pass@1", "pass@3", "majority"]
            done = await client.wait(run.run_id, timeout_s=60)
            assert done.state is RunState.SUCCEEDED
            # The same request id answers the same run, with no second copy.
            again = await client.rescore_run(
                source_id, reducers=["pass@1", "pass@3", "majority"], request_id="rs-1"
            )
            assert again.run_id == run.run_id
            with pytest.raises(AlreadyExists):
                await client.rescore_run(source_id, reducers=["mean"], request_id="rs-1")
            (source,) = await client.results(source_id)
            (rescored,) = await client.results(run.run_id)
            source_samples = [s async for s in client.samples(source_id)]
            rescored_samples = [s async for s in client.samples(run.run_id)]
            comparison = await client.compare_runs(
                baseline_run_id=source_id, candidate_run_id=run.run_id
            )
        # Not one request more: the answers came from the store.
        assert len(list(fake.journal.entries)) == asked
    assert rescored.provenance.rescored_from_run_id == source_id
    assert source.provenance.rescored_from_run_id == ""
    assert rescored.provenance.scorer == source.provenance.scorer
    assert rescored.metrics["exact_match"] == source.metrics["exact_match"]
    assert rescored.metrics["f1"] == source.metrics["f1"]
    assert [m.name for m in source.reduced] == ["pass@1"]
    reduced = {m.name: m for m in rescored.reduced}
    assert list(reduced) == ["pass@1", "pass@3", "majority"]
    assert reduced["pass@1"].value == pytest.approx(rescored.metrics["exact_match"])
    assert reduced["pass@1"] == source.reduced[0]
    assert (reduced["pass@3"].records, reduced["pass@3"].records_skipped) == (N, 0)
    # The execution profile is the source's inference; the answers are the same ones.
    assert rescored.execution.samples_succeeded == source.execution.samples_succeeded
    assert rescored.execution.requests == source.execution.requests == N * REPEAT
    key = lambda s: (s.record_id, s.repeat_index)  # noqa: E731
    assert [(key(s), s.output, s.scores) for s in sorted(rescored_samples, key=key)] == [
        (key(s), s.output, s.scores) for s in sorted(source_samples, key=key)
    ]
    # CompareRuns pairs the two runs' samples: same answers, no change.
    (task,) = comparison.tasks
    assert {m.metric for m in task.metrics} >= {"exact_match", "f1"}
    for metric in task.metrics:
        assert metric.delta == pytest.approx(0.0), metric.metric
        assert metric.records_improved == metric.records_worsened == 0, metric.metric


async def test_refusals_name_what_is_wrong(tmp_path: Path) -> None:
    models = [simulated_model("sim", latency_ms=0.0), simulated_model("slow", latency_ms=600_000)]
    async with (
        running_server(make_config(tmp_path, models=models)) as address,
        AsyncEvaldClient(address) as client,
        raw_stub(address) as stub,
    ):
        await client.upload_dataset(name="sights", version="1.0.0", task_type="qa", records=RECORDS)
        done = await client.create_run(
            models=["sim"], datasets=[("sights", "1.0.0")], repeat=REPEAT
        )
        assert (await client.wait(done.run_id, timeout_s=60)).state is RunState.SUCCEEDED
        with pytest.raises(NotFound) as unknown:
            await client.rescore_run("run_0123456789abcdef")
        assert unknown.value.reason == "RUN_NOT_FOUND"
        busy = await client.create_run(models=["slow"], datasets=[("sights", "1.0.0")])
        with pytest.raises(FailedPrecondition) as running:
            await client.rescore_run(busy.run_id)
        assert running.value.reason == "RUN_NOT_FINISHED"
        await client.cancel_run(busy.run_id)
        for reducers, choice, field, words in [
            (["pass@4"], None, "settings.reducers[0].k", "more than the run's repeat (3)"),
            (["mean", "mean"], None, "settings.reducers[1]", "listed twice"),
            ([], "logprobs", "settings.choice_scoring", "the source run read the text"),
        ]:
            with pytest.raises(InvalidArgument) as bad:
                await client.rescore_run(done.run_id, reducers=reducers, choice_scoring=choice)
            assert bad.value.reason == "RUN_SPEC_INVALID"
            assert [v.field for v in bad.value.field_violations] == [field]
            assert words in bad.value.field_violations[0].description
        # An unknown reducer kind on the wire is named too; a run id is required.
        settings = run_pb2.RescoreSettings()
        settings.reducers.add(kind=99)  # type: ignore[arg-type]
        failure = await fails(
            stub.RescoreRun(service_pb2.RescoreRunRequest(run_id=done.run_id, settings=settings))
        )
        assert_reason(failure, grpc.StatusCode.INVALID_ARGUMENT, "RUN_SPEC_INVALID")
        assert list(failure.violations) == ["settings.reducers[0].kind"]
        failure = await fails(stub.RescoreRun(service_pb2.RescoreRunRequest()))
        assert failure.code is grpc.StatusCode.INVALID_ARGUMENT
        assert list(failure.violations) == ["run_id"]
        # Nothing was created by any refusal: the two runs only.
        assert len([r async for r in client.list_runs()]) == 2
        # A rescored run makes no provider call: retrying its copies is refused.
        rescored = await client.rescore_run(done.run_id)
        await client.wait(rescored.run_id, timeout_s=60)
        with pytest.raises(FailedPrecondition) as retried:
            await client.retry_run(rescored.run_id)
        assert retried.value.reason == "RUN_NOT_RETRYABLE"
        assert f"retry run {done.run_id}" in str(retried.value)


async def test_a_rescore_stored_before_a_restart_is_scored_on_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(tmp_path, models=[simulated_model("sim", latency_ms=0.0)])
    header = DatasetHeader("sights", "1.0.0", TaskType.QA)
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await app.datasets.upload(TENANT, header, [jsonl(RECORDS)])
        source = await app.runs.create(
            TENANT,
            RunSpec(models=("sim",), datasets=(DatasetRef("sights", "1.0.0"),), repeat=REPEAT),
        )
        await wait_until_finished(app, source.run_id)
        # The server dies right after the store's copy: nothing was scored.
        stored_only = Engine.register_run
        monkeypatch.setattr(Engine, "start_rescore", stored_only)
        settings = RescoreSettings(reducers=(ReducerSpec(ScoringReducer.PASS_AT_K, 2),))
        rescored = await app.runs.rescore(TENANT, source.run_id, settings)
        with anyio.move_on_after(0.2):
            await wait_until_finished(app, rescored.run_id)
        assert (await app.runs.get(TENANT, rescored.run_id)).state is ServerRunState.RUNNING
        assert (await app.runs.results(TENANT, rescored.run_id)).items == ()
    monkeypatch.undo()
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await wait_until_finished(app, rescored.run_id)
        run = await app.runs.get(TENANT, rescored.run_id)
        assert run.state is ServerRunState.SUCCEEDED
        (result,) = (await app.runs.results(TENANT, rescored.run_id)).items
        (before,) = (await app.runs.results(TENANT, source.run_id)).items
    assert result.provenance.rescored_from == source.run_id
    assert [m.name for m in result.reduced] == ["pass@2"]
    assert result.report is not None
    assert before.report is not None
    assert result.report.metrics == before.report.metrics


async def test_a_run_scored_by_log_probabilities_is_read_as_text_on_rescore(
    tmp_path: Path,
) -> None:
    """The answering model's letter was "D" every time; log-probabilities picked the
    gold letter of even records. Read as text, every answer is "D"."""

    def answer(chat: FakeChatRequest) -> str:
        return "D"

    def alternatives(chat: FakeChatRequest, text: str) -> list[tuple[str, float]]:
        asked = _QUESTION.findall(str(chat.messages[-1]["content"]))
        number = int(asked[-1][1]) if asked else 1
        if number % 2:
            return [("The", -0.1)]
        return [(" " + "ABCD"[number % 4], -0.5), ("D", -1.5)]

    async with FakeProvider(answer=answer, alternatives=alternatives) as fake:
        model = fake.model_config("fake-m").model_dump(mode="json")
        async with (
            running_server(make_config(tmp_path, models=[model])) as address,
            AsyncEvaldClient(address) as client,
        ):
            await upload_benchmarks(client)
            run = await client.create_run(
                models=["fake-m"], datasets=[("mc", "1.0.0")], choice_scoring="logprobs"
            )
            await client.wait(run.run_id, timeout_s=60)
            asked = fake.journal.requests
            rescored = await client.rescore_run(run.run_id, choice_scoring="text")
            assert rescored.spec.choice_scoring is ChoiceScoring.TEXT
            await client.wait(rescored.run_id, timeout_s=60)
            (by_logprobs,) = await client.results(run.run_id)
            (by_text,) = await client.results(rescored.run_id)
            samples = [s async for s in client.samples(rescored.run_id)]
        assert fake.journal.requests == asked == 8
    before, after = by_logprobs.payload, by_text.payload
    assert isinstance(before, MultipleChoicePayload)
    assert isinstance(after, MultipleChoicePayload)
    assert (before.logprob_scored, before.logprob_fallbacks) == (4, 4)
    assert (after.logprob_scored, after.logprob_fallbacks) == (0, 0)
    assert "logprobs" not in {r.rule for r in after.extraction_rules}
    assert all(not k.startswith("logprob_") for s in samples for k in s.scores)
    gold_d = sum(1 for r in mc_records("mc", 8) if r["answer_index"] == 3)
    assert by_text.metrics["accuracy"] == gold_d / 8


async def test_a_rescore_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    """The same service on the PostgreSQL store: the copy is its one transaction."""
    async with new_database(pg_url, "rescore") as url:
        data = config_data(tmp_path, models=[simulated_model("sim", latency_ms=0.0)])
        data["store"] = {"url": url}
        config = parse_config(data)
        header = DatasetHeader("sights", "1.0.0", TaskType.QA)
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await app.datasets.upload(TENANT, header, [jsonl(RECORDS)])
            refs = (DatasetRef("sights", "1.0.0"),)
            source = await app.runs.create(
                TENANT, RunSpec(models=("sim",), datasets=refs, repeat=REPEAT)
            )
            await wait_until_finished(app, source.run_id)
            settings = RescoreSettings(reducers=(ReducerSpec(ScoringReducer.PASS_HAT_K, 3),))
            rescored = await app.runs.rescore(TENANT, source.run_id, settings, name="again")
            await wait_until_finished(app, rescored.run_id)
            run = await app.runs.get(TENANT, rescored.run_id)
            (result,) = (await app.runs.results(TENANT, rescored.run_id)).items
            (before,) = (await app.runs.results(TENANT, source.run_id)).items
    assert (run.state, run.spec.name, run.spec.rescore_of) == (
        ServerRunState.SUCCEEDED,
        "again",
        source.run_id,
    )
    assert result.provenance.rescored_from == source.run_id
    assert [m.name for m in result.reduced] == ["pass^3"]
    assert result.report is not None
    assert before.report is not None
    assert result.report.metrics == before.report.metrics
