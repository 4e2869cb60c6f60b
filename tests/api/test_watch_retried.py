"""Watching a run that ended and was retried follows it to its current end, as the
server's stream does: the SDK's async and sync ``watch`` and ``evald watch``.

The run fails for good, is retried (RetryRun) while the provider hangs, so the retried
run stays live until the test cancels it; a watcher from seq 0 passes the first
terminal event (FAILED) and ends with the last one (CANCELLED).
"""

import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from evald_client import (
    AsyncEvaldClient,
    EvaldClient,
    Heartbeat,
    RetryPolicy,
    RunEvent,
    RunState,
    StateChanged,
)
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate
from tests._shared import classification_records, wait_for
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

RECORDS = 4
NO_RETRIES = RetryPolicy(max_retries=0, backoff_s=(0.01,), jitter_fraction=0.0)
REJECT = FakeConfig(faults=(FaultRate(Behaviour.error(400), 1.0),))
HANG = FakeConfig(faults=(FaultRate(Behaviour.hang(), 1.0),))
EVALD = [sys.executable, "-m", "evald_cli"]
BOUND_S = 60.0  # a safety bound on waits for what happens at once


@dataclass(frozen=True)
class Served:
    address: str
    fake: FakeProvider


@dataclass(frozen=True)
class Retried:
    run_id: str
    failed_seq: int  # the seq of the first terminal event (FAILED)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """A server and fake provider per test: a failed test leaves its run hanging."""
    async with FakeProvider(REJECT) as fake:
        model = fake.model_config("fake-m", max_concurrency=RECORDS).model_dump(mode="json")
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="four",
                version="1.0.0",
                task_type="classification",
                records=classification_records(RECORDS, prefix="c"),
            )
            yield Served(address, fake)


async def _failed_then_retried(served: Served, client: AsyncEvaldClient) -> Retried:
    """A run whose samples all fail for good, retried while the provider hangs: live,
    until cancelled."""
    served.fake.configure(REJECT)
    run = await client.create_run(
        models=["fake-m"], datasets=[("four", "1.0.0")], retry_policy=NO_RETRIES
    )
    failed = await client.wait(run.run_id, timeout_s=BOUND_S)
    assert failed.state is RunState.FAILED
    served.fake.configure(HANG)
    outcome = await client.retry_run(run.run_id)
    assert outcome.requeued == RECORDS
    assert not outcome.run.is_terminal
    return Retried(run.run_id, failed.last_seq)


def _logged(events: list[RunEvent]) -> list[RunEvent]:
    return [e for e in events if not isinstance(e, Heartbeat)]


def _states(events: list[RunEvent]) -> list[RunState]:
    return [e.state for e in events if isinstance(e, StateChanged)]


async def test_a_watcher_from_seq_0_follows_a_retried_run_to_its_current_end(
    served: Served,
) -> None:
    async with AsyncEvaldClient(served.address) as client:
        retried = await _failed_then_retried(served, client)
        seen: list[RunEvent] = []
        done = anyio.Event()

        async def watch() -> None:
            async with aclosing(client.watch(retried.run_id)) as events:
                async for event in events:
                    seen.append(event)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)

            async def past_the_first_end() -> bool:
                return done.is_set() or any(e.seq > retried.failed_seq for e in _logged(seen))

            await wait_for(past_the_first_end, timeout_s=BOUND_S)
            assert not done.is_set(), "the watch ended at the run's first terminal event"
            await client.cancel_run(retried.run_id)
            with anyio.fail_after(BOUND_S):
                await done.wait()

        final = await client.get_run(retried.run_id)
        assert final.state is RunState.CANCELLED
        logged = _logged(seen)
        assert [e.seq for e in logged] == list(range(1, final.last_seq + 1))
        states = _states(logged)
        assert RunState.FAILED in states
        assert states[states.index(RunState.FAILED) + 1] is RunState.RUNNING  # the retry
        assert states[-1] is RunState.CANCELLED
        assert logged[-1] == next(e for e in reversed(logged) if isinstance(e, StateChanged))

        # Replayed once it is over, from every client, the log ends at the same place.
        async with aclosing(client.watch(retried.run_id)) as events:
            replayed = _logged([e async for e in events])
        assert [e.seq for e in replayed] == [e.seq for e in logged]

        def sync_watch() -> list[RunEvent]:
            with EvaldClient(served.address) as sync:
                return list(sync.watch(retried.run_id))

        synced = _logged(await anyio.to_thread.run_sync(sync_watch))
        assert [e.seq for e in synced] == [e.seq for e in logged]
        assert _states(synced)[-1] is RunState.CANCELLED


async def test_evald_watch_follows_a_retried_run_to_its_current_end(
    served: Served, tmp_path: Path
) -> None:
    async with AsyncEvaldClient(served.address) as client:
        retried = await _failed_then_retried(served, client)
        run_id = retried.run_id
        out_path = tmp_path / "watch.out"

        def lines() -> list[str]:
            return out_path.read_text(encoding="utf-8").splitlines()

        with out_path.open("wb") as out:
            process = await anyio.open_process(
                [*EVALD, "watch", run_id, "--server", served.address],
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        async with process:

            async def past_the_first_end() -> bool:
                shown = lines()
                failed = f"run {run_id}: failed"
                return process.returncode is not None or (
                    failed in shown and f"run {run_id}: running" in shown[shown.index(failed) :]
                )

            await wait_for(past_the_first_end, timeout_s=BOUND_S)
            await client.cancel_run(run_id)
            with anyio.fail_after(BOUND_S):
                code = await process.wait()
        shown = lines()
        assert code == 5, shown  # the run was cancelled in the end
        assert shown[-1] == f"run {run_id}: cancelled"
        # The dashboard's state lines from the first end on (the cancel's request logs
        # one more "running"), then the summary line.
        changes = [line.split(": ", 1)[1] for line in shown if line.startswith(f"run {run_id}: ")]
        after_failure = changes[changes.index("failed") :]
        assert after_failure[:2] == ["failed", "running"], shown
        assert after_failure[-2:] == ["cancelled", "cancelled"], shown
        assert after_failure.count("cancelled") == 2, shown
