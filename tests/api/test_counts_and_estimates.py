"""Counts and estimates mean what they say, through the gRPC server and the SDK, with the
fake provider on loopback:

* ``running`` is a provider call in flight (never more than the model's limit) and the
  claimed rest is ``queued``;
* the throughput is what completed, measured from the start of the run's work, and is
  not claimed before enough has completed (no ETA then);
* CancelRun answers with the state the cancel produced.
"""

from contextlib import aclosing
from datetime import datetime
from pathlib import Path

import anyio
import pytest

from evald_client import AsyncEvaldClient, Progress, RunState
from evald_server.fake_provider import FakeConfig, FakeProvider
from tests._shared import classification_records
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio


async def test_running_counts_calls_in_flight_and_queued_the_claimed_rest(
    tmp_path: Path,
) -> None:
    async with FakeProvider(FakeConfig(latency_ms=150)) as fake:
        model = fake.model_config("m", max_concurrency=2).model_dump(mode="json")
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="d",
                version="1.0.0",
                task_type="classification",
                records=classification_records(16, prefix="c"),
            )
            run = await client.create_run(models=["m"], datasets=[("d", "1.0.0")])
            seen_queued = 0
            with anyio.fail_after(60):
                while not (now := await client.get_run(run.run_id)).is_terminal:
                    counts = now.progress.counts
                    in_flight = fake.journal.in_flight("m")
                    assert counts.running <= 2, counts  # the model's max_concurrency
                    assert counts.running <= in_flight + 2, (counts, in_flight)
                    seen_queued = max(seen_queued, counts.queued)
                    total = (
                        counts.pending
                        + counts.queued
                        + counts.running
                        + counts.retrying
                        + counts.finished
                    )
                    assert total == counts.total, counts
                    await anyio.sleep(0.03)
            assert seen_queued > 0, "the dispatch buffer holds claimed work beyond the calls"
            async with aclosing(client.watch(run.run_id)) as events:
                snapshots = [e for e in [e async for e in events] if isinstance(e, Progress)]
            assert snapshots
            assert all(s.progress.counts.running <= 2 for s in snapshots)
            assert all(
                sum(t.counts.running for t in s.progress.tasks) == s.progress.counts.running
                for s in snapshots
            )


async def test_throughput_is_measured_from_what_completes_and_unknown_at_first(
    tmp_path: Path,
) -> None:
    """Slow calls (1.2 s, two at a time): the true rate is about 1.7/s. A rate taken from
    the first completions onwards read 2-3x that; the estimate must stay near the
    run's real average and say 'unknown' before anything can be told."""
    async with FakeProvider(FakeConfig(latency_ms=1200)) as fake:
        model = fake.model_config("slow", max_concurrency=2).model_dump(mode="json")
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="d",
                version="1.0.0",
                task_type="classification",
                records=classification_records(10, prefix="c"),
            )
            run = await client.create_run(models=["slow"], datasets=[("d", "1.0.0")])
            assert run.created_time is not None
            with anyio.fail_after(60):
                async with aclosing(client.watch(run.run_id)) as events:
                    snapshots = [e async for e in events if isinstance(e, Progress)]
        assert snapshots
        first = snapshots[0]
        assert not first.throughput_known, "two completions cannot tell a rate"
        assert first.eta_s is None or first.progress.counts.finished == 10
        known = [s for s in snapshots if s.throughput_known]
        assert known, "a rate once enough has completed"
        for snapshot in known:
            real = snapshot.progress.counts.finished / _seconds(run.created_time, snapshot)
            assert snapshot.throughput_per_s <= 1.5 * real, (snapshot.throughput_per_s, real)
            assert snapshot.throughput_per_s >= 0.5 * real, (snapshot.throughput_per_s, real)


def _seconds(start: datetime, event: Progress) -> float:
    assert event.event_time is not None
    return (event.event_time - start).total_seconds()


async def test_cancel_run_answers_with_the_state_the_cancel_produced(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=30_000)) as fake:
        model = fake.model_config("hang", max_concurrency=2).model_dump(mode="json")
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="d",
                version="1.0.0",
                task_type="classification",
                records=classification_records(6, prefix="c"),
            )
            run = await client.create_run(models=["hang"], datasets=[("d", "1.0.0")])
            await fake.wait_until(lambda j: j.in_flight("hang") == 2, timeout_s=30)
            answer = await client.cancel_run(run.run_id)
            assert answer.state is RunState.CANCELLED
            assert answer.cancel_requested
            assert answer.progress.counts.cancelled == 6
            assert answer == await client.get_run(run.run_id)
