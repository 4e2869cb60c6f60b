"""Limits, fairness, cancel, repeat and idempotency, against the fake over loopback HTTP."""

import itertools
from pathlib import Path

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.domain import (
    AlreadyExists,
    ErrorReason,
    EventKind,
    ResultStatus,
    RunState,
    TaskState,
)
from evald_server.fake_provider import FakeConfig, FakeProvider
from tests._shared import simulated_model
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished


@pytest.mark.anyio
async def test_peak_concurrency_stays_within_the_model_and_server_limits(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=20)) as fake:
        models = [fake.model_config(m, max_concurrency=3) for m in ("m1", "m2")]
        config = make_config(tmp_path, models, max_inflight=4)
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 40)
            spec = RunSpec(models=("m1", "m2"), datasets=(DatasetRef("d", "1.0.0"),))
            runs = [await app.runs.create(TENANT, spec) for _ in range(2)]
            for run in runs:
                await wait_until_finished(app, run.run_id)
            stats = {(s.name, s.key): s for s in app.engine.limiter_stats()}
            assert stats[("max_inflight", "server")].capacity == 4
            assert stats[("model.max_concurrency", "m1")].in_use == 0
        journal = fake.journal
        assert journal.requests == 160
        assert journal.peak_concurrency("m1") <= 3
        assert journal.peak_concurrency("m2") <= 3
        assert journal.peak_concurrency() <= 4
        assert journal.peak_concurrency() >= 2  # the limits were actually exercised


@pytest.mark.anyio
async def test_a_run_limit_holds_and_two_runs_on_one_model_both_progress(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=10)) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=2)])
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 60)
            first = await app.runs.create(
                TENANT,
                RunSpec(models=("m1",), datasets=(DatasetRef("d", "1.0.0"),), max_concurrency=1),
            )
            second = await app.runs.create(
                TENANT, RunSpec(models=("m1",), datasets=(DatasetRef("d", "1.0.0"),))
            )
            for run in (first, second):
                await wait_until_finished(app, run.run_id)
        entries = fake.journal.entries
        order = [e.key.split("-t")[0] for e in entries if e.key]
        # Before the first run finished, the second had started too (round-robin).
        last_of_first = max(i for i, run_id in enumerate(order) if run_id == first.run_id)
        assert any(run_id == second.run_id for run_id in order[:last_of_first])
        # The first run never had more than one call in flight.
        spans = sorted(
            (e.started_at, e.finished_at or 0)
            for e in entries
            if e.key and e.key.startswith(first.run_id)
        )
        assert all(prev[1] <= nxt[0] + 1e-3 for prev, nxt in itertools.pairwise(spans))


@pytest.mark.anyio
async def test_cancel_aborts_in_flight_calls_and_keeps_finished_work(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=1)) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=3)])
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 30)
            spec = RunSpec(models=("m1",), datasets=(DatasetRef("d", "1.0.0"),))
            run = await app.runs.create(TENANT, spec)
            await fake.wait_until(lambda j: len(j.succeeded_keys()) >= 5, timeout_s=30)
            fake.configure(latency_ms=60_000)  # from now on every call hangs
            await fake.wait_until(lambda j: j.in_flight("m1") == 3, timeout_s=30)
            cancelled = await app.runs.cancel(TENANT, run.run_id)
            assert cancelled.cancel_requested
            await fake.wait_until(lambda j: j.in_flight("m1") == 0, timeout_s=5)
            events = await wait_until_finished(app, run.run_id)
            done = await app.runs.get(TENANT, run.run_id)
            assert done.state is RunState.CANCELLED
            assert done.progress.counters.succeeded >= 5
            assert done.progress.counters.cancelled == 30 - done.progress.counters.succeeded
            (task,) = done.progress.tasks
            assert task.state is TaskState.PARTIAL
            (result,) = (await app.runs.results(TENANT, run.run_id)).items
            assert result.status is ResultStatus.PARTIAL_SUCCESS
            assert result.report is not None
            assert result.report.scored_samples == done.progress.counters.succeeded
            assert events[-1].run_state is RunState.CANCELLED
        assert len(fake.journal.disconnects()) >= 3  # the fake saw the connections close


@pytest.mark.anyio
async def test_a_run_cancelled_before_anything_finished_is_cancelled(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=60_000)) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=2)])
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 5)
            run = await app.runs.create(
                TENANT, RunSpec(models=("m1",), datasets=(DatasetRef("d", "1.0.0"),))
            )
            await fake.wait_until(lambda j: j.in_flight("m1") == 2, timeout_s=30)
            await app.runs.cancel(TENANT, run.run_id)
            await wait_until_finished(app, run.run_id)
            done = await app.runs.get(TENANT, run.run_id)
            assert done.state is RunState.CANCELLED
            assert done.progress.tasks[0].state is TaskState.CANCELLED
            (result,) = (await app.runs.results(TENANT, run.run_id)).items
            assert result.status is ResultStatus.CANCELLED


@pytest.mark.anyio
async def test_repeat_runs_every_record_k_times(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig()) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=4)])
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 5)
            spec = RunSpec(models=("m1",), datasets=(DatasetRef("d", "1.0.0"),), repeat=3)
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id)
            samples = (await app.runs.samples(TENANT, run.run_id, page_size=100)).items
            assert sorted((s.record_id, s.repeat_index) for s in samples) == [
                (f"r{i}", k) for i in range(5) for k in range(3)
            ]
            (result,) = (await app.runs.results(TENANT, run.run_id)).items
            assert result.report is not None
            assert result.report.repeat is not None
            assert result.report.repeat.repeats == 3
        assert fake.journal.requests == 15
        assert len(fake.journal.counts()) == 15  # fifteen distinct subtasks, one call each


@pytest.mark.anyio
async def test_create_run_is_idempotent_per_request_id(tmp_path: Path) -> None:
    config = make_config(tmp_path, [simulated_model("sim")])
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 3)
        spec = RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),))
        first = await app.runs.create(TENANT, spec, request_id="req-1")
        again = await app.runs.create(TENANT, spec, request_id="req-1")
        assert again.run_id == first.run_id
        other = RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),), repeat=2)
        with pytest.raises(AlreadyExists) as conflict:
            await app.runs.create(TENANT, other, request_id="req-1")
        assert conflict.value.reason is ErrorReason.REQUEST_ID_CONFLICT
        assert len((await app.runs.list(TENANT)).items) == 1
        await wait_until_finished(app, first.run_id)


@pytest.mark.anyio
async def test_the_first_finished_task_is_scored_while_another_still_runs(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        [simulated_model("fast", latency_ms=1), simulated_model("slow", latency_ms=60_000)],
    )
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 4)
        spec = RunSpec(models=("fast", "slow"), datasets=(DatasetRef("d", "1.0.0"),))
        run = await app.runs.create(TENANT, spec)
        with anyio.fail_after(30):
            async for event in await app.runs.watch(TENANT, run.run_id):
                if event.kind is EventKind.TASK_SCORED:
                    break
        assert event.evaluation is not None
        assert event.evaluation.model.model_id == "fast"
        now = await app.runs.get(TENANT, run.run_id)
        states = {t.model_id: t.state for t in now.progress.tasks}
        assert states == {"fast": TaskState.SUCCEEDED, "slow": TaskState.RUNNING}
        await app.runs.cancel(TENANT, run.run_id)
        await wait_until_finished(app, run.run_id)
