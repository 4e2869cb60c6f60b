"""Live watchers miss nothing: batches of events of every kind, committed at once and
published a moment later (as the engine does: commit, then tell the hub), while many
watchers join, read for a while, leave and resume with their last seq. Every watcher's
sequence must be gap-free and duplicate-free, and end with the terminal event.

The events are real: their payloads are taken from a run that the engine executed
against the fake provider on loopback (with permanent faults, so that it logged
sample failures), and they are appended to a live run's log in the real SQLite store.
"""

import random
import time
from pathlib import Path

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.domain import EventKind, RunState
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate
from evald_server.store import EventRow, NewEvent
from tests._shared import simulated_model
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished


async def _donor_events(app: Evald) -> list[EventRow]:
    """Events of every kind from a real run (its terminal state change left out)."""
    spec = RunSpec(models=("faulty",), datasets=(DatasetRef("d", "1.0.0"),))
    run = await app.runs.create(TENANT, spec)
    await wait_until_finished(app, run.run_id)
    rows = await app.engine.store.read_events(run.run_id, 0, 10_000)
    kinds = {r.kind for r in rows}
    assert {EventKind.RUN_STATE, EventKind.PROGRESS, EventKind.SAMPLE_FAILED} <= kinds
    assert EventKind.TASK_SCORED in kinds
    return [r for r in rows if not (r.kind is EventKind.RUN_STATE and _terminal(r))]


def _terminal(row: EventRow) -> bool:
    return row.kind is EventKind.RUN_STATE and RunState(row.payload["state"]).is_terminal


class _Progress:
    """When any watcher last saw an event, and how many have seen the terminal one."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.ended = 0

    async def watch_for_stalls(self, watchers: int) -> None:
        """Fail when no watcher sees anything for STALL_S while some have not ended: a
        hang, told apart from a slow machine by the lack of progress, not by the clock
        of the whole test (300 batches took 72 s at load 12 and over 180 s at load 13)."""
        while self.ended < watchers:
            stalled = time.monotonic() - self.last
            assert stalled < STALL_S, f"no watcher saw an event for {stalled:.0f} s"
            await anyio.sleep(0.5)


STALL_S = 60.0


async def _watcher(
    app: Evald,
    run_id: str,
    rng: random.Random,
    sequences: list[list[int]],
    progress: _Progress,
) -> None:
    """Join, read a few events, leave, resume from the last seq; until the terminal."""
    seen: list[int] = []
    sequences.append(seen)
    cursor = 0
    while True:
        budget = rng.randint(1, 40)
        ended = False
        events = await app.runs.watch(TENANT, run_id, cursor)
        async for event in events:
            if event.kind is EventKind.HEARTBEAT:
                continue
            seen.append(event.seq)
            progress.last = time.monotonic()
            cursor = event.seq
            if event.is_terminal:
                ended = True
                progress.ended += 1
                break
            budget -= 1
            if budget == 0:
                break
        await events.aclose()  # type: ignore[attr-defined]
        if ended:
            return
        await anyio.sleep(rng.uniform(0.0, 0.01))


async def _commit_batches(
    app: Evald, run_id: str, donors: list[EventRow], rng: random.Random, batches: int
) -> None:
    """Append batches in one transaction each; publish each a moment after its commit."""
    store, hub = app.engine.store, app.engine.events
    for _ in range(batches):
        picked = [rng.choice(donors) for _ in range(rng.randint(1, 8))]
        rows = await store.append_events(
            run_id, [NewEvent(r.kind, r.payload, r.time) for r in picked]
        )
        await anyio.sleep(rng.choice((0.0, 0.0, rng.uniform(0.0, 0.004))))
        hub.publish(rows)


async def _check_watchers(tmp_path: Path, seed: int, *, watchers: int, batches: int) -> None:
    fault = FaultRate(Behaviour.error(400, message="rejected by the fake"), 0.3)
    async with FakeProvider(FakeConfig(latency_ms=1.0, faults=(fault,), seed=seed)) as fake:
        models = [
            fake.model_config("faulty", max_concurrency=4),
            simulated_model("idle", latency_ms=600_000.0, max_concurrency=1),
        ]
        config = make_config(tmp_path, models, engine={"heartbeat_s": 0.05})
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 24)
            donors = await _donor_events(app)
            terminal = NewEvent(
                EventKind.RUN_STATE, {"state": "succeeded", "previous": "running"}, 0.0
            )
            # A live run whose own work never finishes: its log is ours to fill.
            spec = RunSpec(models=("idle",), datasets=(DatasetRef("d", "1.0.0"),))
            target = await app.runs.create(TENANT, spec)
            sequences: list[list[int]] = []
            progress = _Progress()
            async with anyio.create_task_group() as tg:
                tg.start_soon(progress.watch_for_stalls, watchers)
                for i in range(watchers):
                    tg.start_soon(
                        _watcher,
                        app,
                        target.run_id,
                        random.Random(seed * 97 + i),
                        sequences,
                        progress,
                    )
                async with anyio.create_task_group() as writers:
                    for w in range(2):  # two writers: publishes may arrive out of order
                        writers.start_soon(
                            _commit_batches,
                            app,
                            target.run_id,
                            donors,
                            random.Random(seed * 31 + w),
                            batches,
                        )
                rows = await app.engine.store.append_events(target.run_id, [terminal])
                app.engine.events.publish(rows)
            last = rows[-1].seq
            for seen in sequences:
                assert seen == list(range(1, last + 1)), _first_gap(seen)
            await app.runs.cancel(TENANT, target.run_id)


def _first_gap(seen: list[int]) -> str:
    for i, seq in enumerate(seen):
        if seq != i + 1:
            return f"expected seq {i + 1}, got {seq} (of {len(seen)} seen)"
    return f"ended early after {len(seen)} events"


@pytest.mark.anyio
@pytest.mark.parametrize("seed", range(3))
async def test_watchers_that_join_and_leave_see_every_batch(tmp_path: Path, seed: int) -> None:
    await _check_watchers(tmp_path, seed, watchers=12, batches=120)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.timeout(900)  # a backstop only: the stall watch fails a hang within a minute
@pytest.mark.parametrize("seed", range(100, 106))
async def test_watchers_that_join_and_leave_see_every_batch_long(tmp_path: Path, seed: int) -> None:
    await _check_watchers(tmp_path, seed, watchers=24, batches=300)
