"""Retries against the fault-injecting fake over real HTTP on loopback."""

from pathlib import Path

import pytest

from evald_server.app import DatasetRef, Evald, RetryPolicy, RunSpec
from evald_server.domain import (
    ErrorCategory,
    ErrorReason,
    EventKind,
    ResultStatus,
    RunState,
    SubtaskState,
)
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider
from tests._shared import wait_for
from tests.engine._support import (
    FAST_RETRIES,
    TENANT,
    InlineScoring,
    make_config,
    upload,
    wait_until_finished,
)


def _keys_in_order(fake: FakeProvider) -> list[tuple[str | None, float, float | None, str]]:
    return [(e.key, e.started_at, e.finished_at, e.outcome) for e in fake.journal.entries]


@pytest.mark.anyio
async def test_transient_errors_back_off_and_retry_after_is_honoured(tmp_path: Path) -> None:
    script = (Behaviour.error(503), Behaviour.rate_limited(retry_after_s=1.0), Behaviour.ok())
    async with FakeProvider(FakeConfig(sequence=script)) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=1)])
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "one", 1)
            spec = RunSpec(
                models=("m1",), datasets=(DatasetRef("one", "1.0.0"),), retry_policy=FAST_RETRIES
            )
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id)
            entries = _keys_in_order(fake)
            assert [e[3] for e in entries] == ["http_503", "http_429", "ok"]
            assert len({e[0] for e in entries}) == 1  # one subtask, three attempts
            # Backoff 50 ms after the 503; at least the 1 s Retry-After after the 429.
            first_end, second_start = entries[0][2], entries[1][1]
            second_end, third_start = entries[1][2], entries[2][1]
            assert first_end is not None
            assert second_end is not None
            assert second_start - first_end >= 0.05
            assert third_start - second_end >= 1.0
            (sample,) = (await app.runs.samples(TENANT, run.run_id)).items
            assert sample.state is SubtaskState.SUCCEEDED
            assert sample.attempts == 3
            assert sample.first_error is not None
            assert sample.first_error.reason is ErrorReason.PROVIDER_HTTP_5XX
            assert sample.last_error is not None
            assert sample.last_error.reason is ErrorReason.PROVIDER_RATE_LIMITED
            (result,) = (await app.runs.results(TENANT, run.run_id)).items
            assert result.status is ResultStatus.SUCCESS
            assert (
                result.profile.requests,
                result.profile.retries,
                result.profile.rate_limited,
            ) == (3, 2, 1)


@pytest.mark.anyio
async def test_permanent_errors_are_not_retried(tmp_path: Path) -> None:
    script = (Behaviour.error(400), Behaviour.error(401))
    async with FakeProvider(FakeConfig(sequence=script)) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=1)])
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "three", 3)
            spec = RunSpec(
                models=("m1",), datasets=(DatasetRef("three", "1.0.0"),), retry_policy=FAST_RETRIES
            )
            run = await app.runs.create(TENANT, spec)
            events = await wait_until_finished(app, run.run_id)
            assert fake.journal.requests == 3  # two rejected once each, one success
            failed = (
                await app.runs.samples(TENANT, run.run_id, states=(SubtaskState.FAILED_PERMANENT,))
            ).items
            assert sorted(s.last_error.reason for s in failed if s.last_error) == [
                ErrorReason.PROVIDER_AUTH_FAILED,
                ErrorReason.PROVIDER_REJECTED,
            ]
            assert all(s.attempts == 1 for s in failed)
            assert [e.sample_failure.record_id for e in events if e.sample_failure] == ["r0", "r1"]
            done = await app.runs.get(TENANT, run.run_id)
            assert done.state is RunState.PARTIAL
            (result,) = (await app.runs.results(TENANT, run.run_id)).items
            assert result.status is ResultStatus.PARTIAL_SUCCESS
            assert result.report is not None
            assert result.report.scored_samples == 1
            assert {e.reason for e in result.errors} == {
                ErrorReason.PROVIDER_AUTH_FAILED,
                ErrorReason.PROVIDER_REJECTED,
            }


@pytest.mark.anyio
async def test_retries_stop_after_max_retries_and_retry_run_requeues(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(sequence=(Behaviour.error(502),) * 3)) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=1)])
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "one", 1)
            policy = RetryPolicy(max_retries=2, backoff_s=(0.01,), jitter=0.0)
            spec = RunSpec(
                models=("m1",), datasets=(DatasetRef("one", "1.0.0"),), retry_policy=policy
            )
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id)
            assert fake.journal.requests == 3  # the first attempt and two retries
            done = await app.runs.get(TENANT, run.run_id)
            assert done.state is RunState.FAILED
            (result,) = (await app.runs.results(TENANT, run.run_id)).items
            assert result.status is ResultStatus.FAILED
            assert result.report is None
            # RetryRun re-queues it with a fresh budget; the fake now answers.
            retried, requeued = await app.runs.retry(
                TENANT, run.run_id, categories=(ErrorCategory.MODEL_PROVIDER_ERROR,)
            )
            assert requeued == 1
            assert retried.state is RunState.RUNNING
            events = await wait_until_finished(app, run.run_id)
            assert events[-1].run_state is RunState.SUCCEEDED
            assert [e.kind for e in events].count(EventKind.TASK_SCORED) == 2
            (result,) = (await app.runs.results(TENANT, run.run_id)).items
            assert result.status is ResultStatus.SUCCESS
            assert fake.journal.requests == 4


@pytest.mark.anyio
async def test_a_waiting_retry_survives_a_restart_and_runs_when_due(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(sequence=(Behaviour.error(503),))) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=1)])
        policy = RetryPolicy(max_retries=2, backoff_s=(1.0,), jitter=0.0)
        spec = RunSpec(models=("m1",), datasets=(DatasetRef("one", "1.0.0"),), retry_policy=policy)
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "one", 1)
            run = await app.runs.create(TENANT, spec)
            await fake.wait_until(lambda j: j.outcomes().get("http_503") == 1, timeout_s=30)
            waiting = (SubtaskState.FAILED,)

            async def failed_once() -> bool:
                # The outcome is committed by another task: poll the store for it.
                return bool((await app.runs.samples(TENANT, run.run_id, states=waiting)).items)

            await wait_for(failed_once, timeout_s=10, every_s=0.01)
        # The retry time is in the store: a new process picks it up when it falls due.
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await wait_until_finished(app, run.run_id)
            (sample,) = (await app.runs.samples(TENANT, run.run_id)).items
            assert sample.state is SubtaskState.SUCCEEDED
            assert sample.attempts == 2
        first, second = fake.journal.entries
        assert first.finished_at is not None
        assert second.started_at - first.finished_at >= 1.0
