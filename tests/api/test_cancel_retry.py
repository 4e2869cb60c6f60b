"""CancelRun and RetryRun through the real server: a cancelled run keeps (and scores)
what finished and cancels the rest; permanently failed samples of a finished run are
re-queued by RetryRun and succeed once the provider answers again."""

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path

import anyio
import grpc
import pytest

from evald.v1 import service_pb2
from evald.v1.enums_pb2 import SUBTASK_STATE_RUNNING
from evald_cli.main import main as evald_cli
from evald_client import (
    AsyncEvaldClient,
    ErrorCategory,
    FailedPrecondition,
    InvalidArgument,
    ResultStatus,
    RetryPolicy,
    RunState,
    StateChanged,
    SubtaskState,
    TaskState,
)
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate
from tests._shared import classification_records, simulated_model, wait_for
from tests.api._support import assert_reason, fails, raw_stub
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

SLOW_RECORDS = 24
TINY_BACKOFF = RetryPolicy(max_retries=2, backoff_s=(0.01,), jitter_fraction=0.0)


@dataclass(frozen=True)
class Cancelled:
    address: str
    run_id: str
    succeeded_at_cancel: int


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    config = make_config(
        tmp_path_factory.mktemp("cancel"),
        models=[
            simulated_model("sim-200ms", latency_ms=200, max_concurrency=2, accuracy=1.0),
            simulated_model("sim-fast", latency_ms=1, max_concurrency=4),
        ],
    )
    async with running_server(config) as bound, AsyncEvaldClient(bound) as client:
        await client.upload_dataset(
            name="records",
            version="1.0.0",
            task_type="classification",
            records=classification_records(SLOW_RECORDS, prefix="c"),
        )
        yield bound


@pytest.fixture(scope="module")
async def cancelled(address: str) -> Cancelled:
    """A run on the slow model, cancelled once a few samples finished."""
    async with AsyncEvaldClient(address) as client:
        run = await client.create_run(models=["sim-200ms"], datasets=[("records", "1.0.0")])

        async def some_finished() -> int:
            return (await client.get_run(run.run_id)).progress.counts.succeeded >= 2

        await wait_for(some_finished)
        answer = await client.cancel_run(run.run_id)
        assert answer.run_id == run.run_id
        final = await client.wait(run.run_id, timeout_s=30)
        return Cancelled(address, run.run_id, final.progress.counts.succeeded)


async def test_cancel_keeps_finished_work_and_cancels_the_rest(cancelled: Cancelled) -> None:
    async with AsyncEvaldClient(cancelled.address) as client:
        run = await client.get_run(cancelled.run_id)
        assert run.state is RunState.CANCELLED
        assert run.finished_time is not None
        counts = run.progress.counts
        assert counts.succeeded >= 2
        assert counts.succeeded < SLOW_RECORDS, "the cancel came before the end"
        assert (counts.pending, counts.running, counts.retrying, counts.failed_permanent) == (
            0,
            0,
            0,
            0,
        )
        assert counts.cancelled == SLOW_RECORDS - counts.succeeded

        samples = [s async for s in client.samples(run.run_id)]
        assert len(samples) == SLOW_RECORDS
        done = [s for s in samples if s.state is SubtaskState.SUCCEEDED]
        stopped = [s for s in samples if s.state is SubtaskState.CANCELLED]
        assert len(done) == counts.succeeded
        assert len(stopped) == counts.cancelled
        assert all(s.output and s.scores for s in done), "kept and scored"
        assert all(not s.scores for s in stopped)

        # The partial result covers exactly the samples that finished.
        (result,) = await client.results(run.run_id)
        assert result.status in (ResultStatus.PARTIAL_SUCCESS, ResultStatus.CANCELLED)
        assert result.metrics["accuracy"] == pytest.approx(1.0)  # accuracy 1.0 model
        assert result.execution.samples_succeeded == counts.succeeded
        assert result.execution.samples_cancelled == counts.cancelled
        assert result.execution.samples_failed == 0

        async with aclosing(client.watch(run.run_id)) as events:
            log = [e async for e in events]
        assert isinstance(log[-1], StateChanged)
        assert log[-1].state is RunState.CANCELLED


async def test_cancelled_task_with_finished_work_is_scored_partial(
    cancelled: Cancelled,
) -> None:
    """DESIGN §3: finished work is kept and scored; the task is partial, its result says
    how many samples were cancelled."""
    async with AsyncEvaldClient(cancelled.address) as client:
        run = await client.get_run(cancelled.run_id)
        (result,) = await client.results(run.run_id)
        assert result.metrics
        assert result.status is ResultStatus.PARTIAL_SUCCESS
        assert result.execution.samples_cancelled > 0
        assert run.progress.tasks[0].state is TaskState.PARTIAL


async def test_cancelling_again_returns_the_run_unchanged(cancelled: Cancelled) -> None:
    async with AsyncEvaldClient(cancelled.address) as client:
        before = await client.get_run(cancelled.run_id)
        again = await client.cancel_run(cancelled.run_id)
        assert again == before, "CancelRun on a terminal run returns it unchanged"
        assert await client.get_run(cancelled.run_id) == before
        # Nothing failed for good, and its cancelled samples are retried only when asked.
        with pytest.raises(FailedPrecondition) as info:
            await client.retry_run(cancelled.run_id)
        assert info.value.reason == "RUN_NOT_RETRYABLE"


async def test_retry_run_on_a_live_run_is_refused(address: str) -> None:
    async with AsyncEvaldClient(address) as client, raw_stub(address) as stub:
        run = await client.create_run(models=["sim-200ms"], datasets=[("records", "1.0.0")])
        failure = await fails(stub.RetryRun(service_pb2.RetryRunRequest(run_id=run.run_id)))
        assert_reason(
            failure, grpc.StatusCode.FAILED_PRECONDITION, "RUN_NOT_RETRYABLE", runId=run.run_id
        )
        assert failure.metadata["state"] in ("pending", "running")
        # Cancelling twice while it is live is fine too; it ends cancelled.
        await client.cancel_run(run.run_id)
        await client.cancel_run(run.run_id)
        assert (await client.wait(run.run_id, timeout_s=30)).state is RunState.CANCELLED


async def test_retry_run_without_failed_samples_is_refused(address: str) -> None:
    async with AsyncEvaldClient(address) as client:
        run = await client.create_run(models=["sim-fast"], datasets=[("records", "1.0.0")])
        assert (await client.wait(run.run_id, timeout_s=30)).state is RunState.SUCCEEDED
        with pytest.raises(FailedPrecondition) as info:
            await client.retry_run(run.run_id)
        assert info.value.reason == "RUN_NOT_RETRYABLE"


async def test_retry_requeues_permanently_failed_samples(tmp_path: Path) -> None:
    rejected = 3
    # One transient 503 (retried after a tiny backoff), then three permanent 400s.
    script = (Behaviour.error(503), *[Behaviour.error(400)] * rejected)
    async with FakeProvider(FakeConfig(sequence=script)) as fake:
        model = fake.model_config("fake-m", max_concurrency=1).model_dump(mode="json")
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="eight",
                version="1.0.0",
                task_type="classification",
                records=classification_records(8, prefix="c"),
            )
            run = await client.create_run(
                models=["fake-m"], datasets=[("eight", "1.0.0")], retry_policy=TINY_BACKOFF
            )
            first = await client.wait(run.run_id, timeout_s=30)
            assert first.state is RunState.PARTIAL
            assert (first.progress.counts.succeeded, first.progress.counts.failed_permanent) == (
                8 - rejected,
                rejected,
            )
            failed = [
                s async for s in client.samples(run.run_id, state=SubtaskState.FAILED_PERMANENT)
            ]
            assert len(failed) == rejected
            assert all(s.last_error and s.last_error.reason == "PROVIDER_REJECTED" for s in failed)
            (partial,) = await client.results(run.run_id)
            assert partial.status is ResultStatus.PARTIAL_SUCCESS
            task_id = partial.task_id

            # Filters that match nothing, or name a task the run does not have.
            with pytest.raises(FailedPrecondition):
                await client.retry_run(run.run_id, categories=[ErrorCategory.DATASET_INVALID])
            with pytest.raises(InvalidArgument):
                await client.retry_run(run.run_id, task_ids=["no-such-task"])

            fake.configure(FakeConfig())  # the provider answers again
            outcome = await client.retry_run(
                run.run_id, task_ids=[task_id], categories=[ErrorCategory.MODEL_PROVIDER_ERROR]
            )
            assert outcome.requeued == rejected
            assert not outcome.run.is_terminal
            async with aclosing(client.watch(run.run_id, after_seq=first.last_seq)) as events:
                after = [e async for e in events]
            assert isinstance(after[-1], StateChanged)
            assert after[-1].state is RunState.SUCCEEDED

            final = await client.get_run(run.run_id)
            assert final.state is RunState.SUCCEEDED
            assert (final.progress.counts.succeeded, final.progress.counts.failed_permanent) == (
                8,
                0,
            )
            retried = {s.subtask_id: s async for s in client.samples(run.run_id)}
            for sample in failed:
                now = retried[sample.subtask_id]
                assert now.state is SubtaskState.SUCCEEDED
                assert now.output
                assert now.attempts == sample.attempts + 1
            (result,) = await client.results(run.run_id)
            assert result.status is ResultStatus.SUCCESS
            assert result.execution.samples_succeeded == 8
            # Once more: nothing is left to retry.
            with pytest.raises(FailedPrecondition):
                await client.retry_run(run.run_id)
        assert fake.journal.requests == 1 + 8 + rejected  # the 503 retry, 8 firsts, 3 retries


async def test_retry_by_reason_requeues_only_the_rate_limited_samples(tmp_path: Path) -> None:
    """Every provider failure is MODEL_PROVIDER_ERROR; the reason tells a 429 from a 400,
    so "re-run the rate-limited samples, skip the rejected ones" is one call."""
    no_retries = RetryPolicy(max_retries=0, backoff_s=(0.01,), jitter_fraction=0.0)
    script = (Behaviour.error(400), Behaviour.error(400), *[Behaviour.rate_limited()] * 2)
    async with FakeProvider(FakeConfig(sequence=script)) as fake:
        model = fake.model_config("fake-m", max_concurrency=1).model_dump(mode="json")
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="eight",
                version="1.0.0",
                task_type="classification",
                records=classification_records(8, prefix="c"),
            )
            run = await client.create_run(
                models=["fake-m"], datasets=[("eight", "1.0.0")], retry_policy=no_retries
            )
            first = await client.wait(run.run_id, timeout_s=30)
            failed = {
                s.subtask_id: s.last_error.reason if s.last_error else ""
                async for s in client.samples(run.run_id, state=SubtaskState.FAILED_PERMANENT)
            }
            assert (
                sorted(failed.values()) == ["PROVIDER_RATE_LIMITED"] * 2 + ["PROVIDER_REJECTED"] * 2
            )
            with pytest.raises(ValueError, match="unknown error reason"):
                await client.retry_run(run.run_id, reasons=["PROVIDER_NOPE"])

            outcome = await client.retry_run(run.run_id, reasons=["provider_rate_limited"])
            assert outcome.requeued == 2
            final = await client.wait(run.run_id, timeout_s=30)
            assert final.state is RunState.PARTIAL
            assert final.last_seq > first.last_seq
            still = {
                s.subtask_id: s.last_error.reason if s.last_error else ""
                async for s in client.samples(run.run_id, state=SubtaskState.FAILED_PERMANENT)
            }
            assert still == {k: v for k, v in failed.items() if v == "PROVIDER_REJECTED"}
            # Nothing rate-limited is left; the filters combine (reason AND category).
            with pytest.raises(FailedPrecondition):
                await client.retry_run(run.run_id, reasons=["PROVIDER_RATE_LIMITED"])
            with pytest.raises(FailedPrecondition):
                await client.retry_run(
                    run.run_id,
                    reasons=["PROVIDER_REJECTED"],
                    categories=[ErrorCategory.DATASET_INVALID],
                )
        assert fake.journal.requests == 8 + 2  # only the two rate-limited ones again


async def test_retry_by_state_resumes_a_cancelled_run(address: str) -> None:
    async with AsyncEvaldClient(address) as client, raw_stub(address) as stub:
        run = await client.create_run(models=["sim-200ms"], datasets=[("records", "1.0.0")])

        async def some_finished() -> bool:
            return (await client.get_run(run.run_id)).progress.counts.succeeded >= 2

        await wait_for(some_finished)
        await client.cancel_run(run.run_id)
        stopped = await client.wait(run.run_id, timeout_s=30)
        assert stopped.state is RunState.CANCELLED
        cancelled = stopped.progress.counts.cancelled
        assert cancelled > 0
        # Without the state filter there is nothing failed to retry; the error says how
        # to resume.
        with pytest.raises(FailedPrecondition, match="states: cancelled"):
            await client.retry_run(run.run_id)
        failure = await fails(
            stub.RetryRun(
                service_pb2.RetryRunRequest(run_id=run.run_id, states=[SUBTASK_STATE_RUNNING])
            )
        )
        assert_reason(failure, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
        assert "states" in failure.violations

        outcome = await client.retry_run(run.run_id, states=[SubtaskState.CANCELLED])
        assert outcome.requeued == cancelled
        final = await client.wait(run.run_id, timeout_s=30)
        assert final.state is RunState.SUCCEEDED
        assert final.progress.counts.succeeded == SLOW_RECORDS
        (result,) = await client.results(run.run_id)
        assert result.status is ResultStatus.SUCCESS
        assert result.execution.samples_succeeded == SLOW_RECORDS


async def test_retrying_only_the_failed_samples_of_a_cancelled_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evald retry RUN --reason R` / `--state failed_permanent` on a cancelled run
    re-queues its failed samples only: they run, the cancelled ones stay cancelled (not
    asked again), and the run ends in the state its tasks give (partial here)."""
    rejected, records = 2, 6
    no_retries = RetryPolicy(max_retries=0, backoff_s=(0.01,), jitter_fraction=0.0)
    # Two permanent 400s, then every call hangs until the cancel aborts it.
    hang = FakeConfig(
        sequence=(Behaviour.error(400),) * rejected,
        faults=(FaultRate(Behaviour.hang(), 1.0),),
    )
    async with FakeProvider(hang) as fake:
        model = fake.model_config("fake-m", max_concurrency=2).model_dump(mode="json")
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="six",
                version="1.0.0",
                task_type="classification",
                records=classification_records(records, prefix="c"),
            )
            run = await client.create_run(
                models=["fake-m"], datasets=[("six", "1.0.0")], retry_policy=no_retries
            )

            async def both_rejected() -> bool:
                counts = (await client.get_run(run.run_id)).progress.counts
                return counts.failed_permanent == rejected

            await wait_for(both_rejected)
            await client.cancel_run(run.run_id)
            stopped = await client.wait(run.run_id, timeout_s=30)
            assert stopped.state is RunState.CANCELLED
            counts = stopped.progress.counts
            assert (counts.failed_permanent, counts.cancelled) == (rejected, records - rejected)
            cancelled = {
                s.subtask_id: s
                async for s in client.samples(run.run_id, state=SubtaskState.CANCELLED)
            }
            asked = fake.journal.requests

            fake.configure(FakeConfig())  # the provider answers again
            argv = ["retry", run.run_id, "--reason", "PROVIDER_REJECTED", "--server", address]
            assert await anyio.to_thread.run_sync(evald_cli, argv) == 0
            assert capsys.readouterr().out == (
                f"run {run.run_id}: {rejected} samples re-queued, running\n"
            )
            final = await client.wait(run.run_id, timeout_s=30)
            assert final.state is RunState.PARTIAL, "cancelled samples remain"
            assert (final.cancel_requested, final.cancel_reason) == (False, "")
            counts = final.progress.counts
            assert (counts.succeeded, counts.failed_permanent, counts.cancelled) == (
                rejected,
                0,
                records - rejected,
            )
            after = {s.subtask_id: s async for s in client.samples(run.run_id)}
            for subtask_id, sample in cancelled.items():
                assert after[subtask_id] == sample, "a cancelled sample is left as it was"
            (result,) = await client.results(run.run_id)
            assert result.status is ResultStatus.PARTIAL_SUCCESS
            assert result.execution.samples_succeeded == rejected
            assert result.execution.samples_cancelled == records - rejected

            # The same by state (`--state failed_permanent`): nothing failed is left.
            with pytest.raises(FailedPrecondition, match="no failed_permanent subtasks"):
                await client.retry_run(run.run_id, states=[SubtaskState.FAILED_PERMANENT])
        assert fake.journal.requests == asked + rejected, "only the failed ones asked again"
