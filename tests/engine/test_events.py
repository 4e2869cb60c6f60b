"""Run event subscriptions: replay, live follow, no gap, no duplicate, slow subscribers."""

import time
from pathlib import Path

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RunEvent, RunSpec
from evald_server.domain import ErrorReason, EventKind, OutOfRange, RunState
from evald_server.engine import EventHub
from evald_server.store import NewEvent, SqliteStore
from tests._shared import simulated_model, wait_for
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished
from tests.store._helpers import add_dataset, add_run


def _stored(events: list[RunEvent]) -> list[RunEvent]:
    return [e for e in events if e.kind is not EventKind.HEARTBEAT]


@pytest.mark.anyio
async def test_replay_then_live_without_gaps_or_duplicates(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        [simulated_model("sim", latency_ms=10, max_concurrency=4)],
        engine={"heartbeat_s": 0.2},
    )
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 400)
        run = await app.runs.create(
            TENANT, RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),))
        )
        live: list[RunEvent] = []
        late: list[RunEvent] = []

        async def follow_from_start() -> None:
            live.extend(await wait_until_finished(app, run.run_id))

        async def join_midway() -> None:
            # Join once events exist, resuming after seq 3 (a reconnecting client).
            async def events_exist() -> bool:
                return (await app.runs.get(TENANT, run.run_id)).last_seq >= 4

            await wait_for(events_exist, timeout_s=30, every_s=0.01)
            with anyio.fail_after(30):
                async for event in await app.runs.watch(TENANT, run.run_id, after_seq=3):
                    late.append(event)

        async with anyio.create_task_group() as tg:
            tg.start_soon(follow_from_start)
            tg.start_soon(join_midway)
        full = _stored(live)
        assert [e.seq for e in full] == list(range(1, len(full) + 1))
        assert [e.seq for e in _stored(late)] == [e.seq for e in full[3:]]
        assert full[-1].run_state is RunState.SUCCEEDED
        kinds = [e.kind for e in full]
        assert kinds.count(EventKind.PROGRESS) >= 2
        # Replay of a finished run gives the same events again.
        replay = await wait_until_finished(app, run.run_id)
        assert [(e.seq, e.kind) for e in replay] == [(e.seq, e.kind) for e in full]
        progress = [e.progress for e in full if e.progress is not None]
        assert progress[-1].counters.succeeded <= 400
        assert [p.counters.succeeded for p in progress] == sorted(
            p.counters.succeeded for p in progress
        )
        # A client that saw the terminal event gets nothing more, at once.
        assert [
            e async for e in await app.runs.watch(TENANT, run.run_id, after_seq=full[-1].seq)
        ] == []


@pytest.mark.anyio
async def test_a_slow_subscriber_never_slows_the_run(tmp_path: Path) -> None:
    config = make_config(tmp_path, [simulated_model("sim", latency_ms=1, max_concurrency=8)])
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 400)
        run = await app.runs.create(
            TENANT, RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),))
        )
        received: list[RunEvent] = []
        finished_while_behind = False

        async def finished() -> bool:
            return (await app.runs.get(TENANT, run.run_id)).state.is_terminal

        with anyio.fail_after(60):
            async for event in await app.runs.watch(TENANT, run.run_id):
                received.append(event)
                if len(received) == 2:
                    # Stall this subscriber until the engine has finished the whole run.
                    await wait_for(finished, timeout_s=60)
                    finished_while_behind = True
        assert finished_while_behind
        stored = _stored(received)
        assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
        assert stored[-1].run_state is RunState.SUCCEEDED


@pytest.mark.anyio
async def test_heartbeats_carry_the_current_seq_when_nothing_happens(tmp_path: Path) -> None:
    config = make_config(
        tmp_path, [simulated_model("sim", latency_ms=60_000)], engine={"heartbeat_s": 0.05}
    )
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 1)
        run = await app.runs.create(
            TENANT, RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),))
        )
        seen: list[RunEvent] = []
        with anyio.fail_after(30):
            async for event in await app.runs.watch(TENANT, run.run_id):
                seen.append(event)
                if sum(e.kind is EventKind.HEARTBEAT for e in seen) == 2:
                    break
        last_stored = max(e.seq for e in seen if e.kind is not EventKind.HEARTBEAT)
        assert all(e.seq == last_stored for e in seen if e.kind is EventKind.HEARTBEAT)
        await app.runs.cancel(TENANT, run.run_id)
        await wait_until_finished(app, run.run_id)


@pytest.mark.anyio
async def test_a_cursor_older_than_what_is_retained_is_out_of_range(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "e.sqlite3", events_retained_per_run=100)
    try:
        run = await add_run(store, [await add_dataset(store)])
        for i in range(15):
            await store.append_events(
                run.run_id,
                [NewEvent(EventKind.HEARTBEAT, {"i": i * 10 + j}, time.time()) for j in range(10)],
            )
        hub = EventHub(store, heartbeat_s=0.05)
        with pytest.raises(OutOfRange) as expired:
            await hub.subscribe(run.run_id, 10)
        assert expired.value.reason is ErrorReason.WATCH_SEQ_EXPIRED
        assert expired.value.metadata == {"oldestSeq": "52"}
        events = []
        async for event in await hub.subscribe(run.run_id, 51):
            if event.seq == 151:
                break
            events.append(event.seq)
        assert events == list(range(52, 151))
    finally:
        await store.close()
