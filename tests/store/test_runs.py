"""Runs, claims, outcomes and counters on a real SQLite file."""

import random
import time

import anyio
import anyio.lowlevel
import pytest

from evald_server.domain import (
    Counters,
    ErrorReason,
    EvalError,
    EventKind,
    OutcomeKind,
    RunState,
    SubtaskState,
    TaskState,
)
from evald_server.store import ClaimedSubtask, NewEvent, Store, SubtaskOutcome, TaskFinish
from tests.store._helpers import Reopen, add_dataset, add_run


def outcome(item: ClaimedSubtask, kind: OutcomeKind, **fields: object) -> SubtaskOutcome:
    return SubtaskOutcome(
        row_id=item.row_id,
        run_id=item.run_id,
        task_id=item.task_id,
        model_id=item.model_id,
        record_idx=item.record_idx,
        repeat_index=item.repeat_index,
        kind=kind,
        **fields,  # type: ignore[arg-type]
    )


async def assert_counters_match_recount(store: Store, run_id: str) -> None:
    run = await store.get_run(run_id)
    assert run is not None
    total = Counters()
    for task in await store.get_tasks(run_id):
        recount = await store.recount_task(task.task_id)
        assert task.counters == recount, task.task_id
        total = Counters(
            *(
                a + b
                for a, b in zip(total.as_dict().values(), recount.as_dict().values(), strict=True)
            )
        )
    assert run.counters == total


ERROR = EvalError.of(ErrorReason.PROVIDER_HTTP_5XX, "502 from provider")


@pytest.mark.anyio
async def test_create_run_writes_every_subtask_and_its_counters(store: Store) -> None:
    ds = await add_dataset(store, records=7)
    run = await add_run(store, [ds], ("m1", "m2"), repeat=3)
    assert run.state is RunState.PENDING
    assert run.counters.total == run.counters.pending == 7 * 2 * 3
    tasks = await store.get_tasks(run.run_id)
    assert [t.counters.total for t in tasks] == [21, 21]
    events = await store.read_events(run.run_id, 0, 10)
    assert [(e.seq, e.kind, e.payload["state"]) for e in events] == [
        (1, EventKind.RUN_STATE, "pending")
    ]
    await assert_counters_match_recount(store, run.run_id)


@pytest.mark.anyio
async def test_a_reused_request_id_returns_the_existing_run(store: Store) -> None:
    ds = await add_dataset(store)
    first = await add_run(store, [ds], run_id="run_a", request_id="req-1", request_hash="h1")
    again = await add_run(store, [ds], run_id="run_b", request_id="req-1", request_hash="h2")
    assert again.run_id == first.run_id
    assert again.request_hash == "h1"  # the caller compares and reports the conflict
    assert await store.get_run("run_b") is None


@pytest.mark.anyio
async def test_claims_take_pages_in_run_order_and_say_when_exhausted(store: Store) -> None:
    ds = await add_dataset(store, records=5)
    run = await add_run(store, [ds, await add_dataset(store, "second", 3)])
    first = await store.claim_ready(run.run_id, "m1", 4, time.time())
    assert [(s.task_id, s.record_idx) for s in first.subtasks] == [
        (f"{run.run_id}_t0", i) for i in range(4)
    ]
    assert not first.exhausted
    assert first.subtasks[0].fields == {"text": "x0"}
    assert [e.payload["state"] for e in first.events] == ["running"]
    # The page runs on into the next dataset: no idle gap between datasets.
    second = await store.claim_ready(run.run_id, "m1", 4, time.time())
    assert [(s.task_id, s.record_idx) for s in second.subtasks] == [
        (f"{run.run_id}_t0", 4),
        (f"{run.run_id}_t1", 0),
        (f"{run.run_id}_t1", 1),
        (f"{run.run_id}_t1", 2),
    ]
    third = await store.claim_ready(run.run_id, "m1", 4, time.time())
    assert third.subtasks == ()
    assert third.exhausted
    assert (await store.claim_ready(run.run_id, "other-model", 4, time.time())).subtasks == ()
    stored = await store.get_run(run.run_id)
    assert stored is not None
    assert stored.state is RunState.RUNNING
    assert stored.counters.running == 8
    await assert_counters_match_recount(store, run.run_id)


@pytest.mark.anyio
async def test_outcomes_move_counters_and_finish_the_task(store: Store) -> None:
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds])
    a, b, c = (await store.claim_ready(run.run_id, "m1", 3, time.time())).subtasks
    due = time.time() + 3600
    report = await store.record_outcomes(
        [
            outcome(a, OutcomeKind.SUCCEEDED, output="yes", latency_s=0.1, call_time_s=0.1),
            outcome(b, OutcomeKind.RETRY, error=ERROR, next_attempt_at=due),
            outcome(c, OutcomeKind.FAILED_PERMANENT, error=ERROR),
        ],
        time.time(),
    )
    assert report.applied == 3
    assert report.finished_tasks == ()
    assert [(r.model_id, r.next_attempt_at) for r in report.retries] == [("m1", due)]
    assert report.completed_per_run == {run.run_id: 2}
    assert [e.kind for e in report.events] == [EventKind.SAMPLE_FAILED]
    assert report.events[0].payload["subtask_id"] == c.subtask_id
    # The retry is not due yet: nothing to claim, and the claim says when it will be.
    claim = await store.claim_ready(run.run_id, "m1", 3, time.time())
    assert claim.subtasks == ()
    assert claim.next_retry_at == due
    # Once due it is claimed again, keeping its first error beside the last.
    retry = await store.claim_ready(run.run_id, "m1", 3, due + 1)
    assert [s.row_id for s in retry.subtasks] == [b.row_id]
    assert retry.subtasks[0].attempt == 1
    later = EvalError.of(ErrorReason.PROVIDER_TIMEOUT, "timed out")
    report = await store.record_outcomes(
        [outcome(retry.subtasks[0], OutcomeKind.FAILED_PERMANENT, error=later)], time.time()
    )
    assert report.finished_tasks == (f"{run.run_id}_t0",)
    rows = await store.task_subtasks(f"{run.run_id}_t0", (), 0, 10)
    assert [r.state for r in rows] == [
        SubtaskState.SUCCEEDED,
        SubtaskState.FAILED_PERMANENT,
        SubtaskState.FAILED_PERMANENT,
    ]
    assert rows[1].first_error == ERROR
    assert rows[1].last_error == later
    assert rows[1].attempt == 2
    assert rows[1].requests == 2
    task = await store.get_task(f"{run.run_id}_t0")
    assert task is not None
    assert task.state is TaskState.SCORING
    await assert_counters_match_recount(store, run.run_id)


@pytest.mark.anyio
async def test_a_row_taken_back_by_a_restart_is_not_overwritten(
    store: Store, reopen: Reopen
) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds])
    claimed = (await store.claim_ready(run.run_id, "m1", 2, time.time())).subtasks
    store = await reopen(store)
    assert await store.requeue_running(owner=None, now=time.time()) == 2
    report = await store.record_outcomes(
        [outcome(claimed[0], OutcomeKind.SUCCEEDED, output="late")], time.time()
    )
    assert report.applied == 0
    rows = await store.task_subtasks(claimed[0].task_id, (), 0, 10)
    assert [r.state for r in rows] == [SubtaskState.PENDING, SubtaskState.PENDING]
    assert [r.attempt for r in rows] == [0, 0]  # no retry spent
    await assert_counters_match_recount(store, run.run_id)


@pytest.mark.anyio
async def test_counters_equal_a_recount_under_concurrent_updates(store: Store) -> None:
    datasets = [await add_dataset(store, f"d{i}", 40) for i in range(3)]
    runs = [await add_run(store, datasets, ("m1", "m2"), run_id=f"run_{i}") for i in range(3)]
    rng = random.Random(7)
    kinds = [
        OutcomeKind.SUCCEEDED,
        OutcomeKind.RETRY,
        OutcomeKind.FAILED_PERMANENT,
        OutcomeKind.RELEASED,
    ]

    async def worker(run_id: str, model: str) -> None:
        for _ in range(200):  # bounded; ends early once the work is gone
            claim = await store.claim_ready(run_id, model, rng.randint(1, 9), time.time())
            if not claim.subtasks and claim.exhausted and claim.next_retry_at is None:
                return
            batch = [
                outcome(s, kind, error=ERROR, next_attempt_at=time.time())
                for s in claim.subtasks
                for kind in [rng.choice(kinds)]
            ]
            if batch:
                await store.record_outcomes(batch, time.time())
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        for run in runs:
            for model in ("m1", "m2"):
                tg.start_soon(worker, run.run_id, model)
        tg.start_soon(store.cancel_run, "run_2", time.time())
    for run in runs:
        await assert_counters_match_recount(store, run.run_id)


@pytest.mark.anyio
async def test_cancel_cancels_waiting_work_and_scoring_ends_the_run(store: Store) -> None:
    ds = await add_dataset(store, records=4)
    run = await add_run(store, [ds])
    running = (await store.claim_ready(run.run_id, "m1", 1, time.time())).subtasks
    report = await store.cancel_run(run.run_id, time.time())
    assert report.changed == 3
    assert report.finished_tasks == ()
    assert (await store.cancel_run(run.run_id, time.time())).changed == 0
    assert (await store.claim_ready(run.run_id, "m1", 9, time.time())).subtasks == ()
    # The owner reports the aborted call; a retry outcome of a cancelled run is a cancel.
    done = await store.record_outcomes(
        [outcome(running[0], OutcomeKind.RETRY, error=ERROR, next_attempt_at=time.time())],
        time.time(),
    )
    assert done.finished_tasks == (f"{run.run_id}_t0",)
    assert done.retries == ()
    finish = await store.finish_task(
        TaskFinish(
            task_id=f"{run.run_id}_t0",
            state=TaskState.CANCELLED,
            result_status="cancelled",
            result={"status": "cancelled"},
            event_payload={"task_id": f"{run.run_id}_t0"},
            time=time.time(),
        )
    )
    assert finish.run_state is RunState.CANCELLED
    stored = await store.get_run(run.run_id)
    assert stored is not None
    assert stored.state is RunState.CANCELLED
    assert stored.terminal_seq == stored.last_seq == finish.events[-1].seq
    assert await store.read_results(run.run_id) == [(f"{run.run_id}_t0", {"status": "cancelled"})]
    await assert_counters_match_recount(store, run.run_id)


@pytest.mark.anyio
async def test_retry_failed_requeues_permanent_failures_by_category(store: Store) -> None:
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds])
    items = (await store.claim_ready(run.run_id, "m1", 3, time.time())).subtasks
    rejected = EvalError.of(ErrorReason.PROVIDER_REJECTED, "400")
    report = await store.record_outcomes(
        [
            outcome(items[0], OutcomeKind.SUCCEEDED, output="ok"),
            outcome(items[1], OutcomeKind.FAILED_PERMANENT, error=ERROR),
            outcome(items[2], OutcomeKind.FAILED_PERMANENT, error=rejected),
        ],
        time.time(),
    )
    (task_id,) = report.finished_tasks
    await store.finish_task(
        TaskFinish(task_id, TaskState.PARTIAL, "partial_success", {"n": 1}, time=time.time())
    )
    wrong = await store.retry_failed(run.run_id, (), ("eval_operator_error",), time.time())
    assert wrong.changed == 0
    retried = await store.retry_failed(run.run_id, (), ("model_provider_error",), time.time())
    assert retried.changed == 2
    assert retried.models == ("m1",)
    stored = await store.get_run(run.run_id)
    assert stored is not None
    assert stored.state is RunState.RUNNING
    assert stored.terminal_seq is None
    assert await store.read_results(run.run_id) == []
    again = await store.claim_ready(run.run_id, "m1", 9, time.time())
    assert sorted(s.row_id for s in again.subtasks) == sorted([items[1].row_id, items[2].row_id])
    assert all(s.attempt == 0 for s in again.subtasks)
    await assert_counters_match_recount(store, run.run_id)


@pytest.mark.anyio
async def test_event_seqs_are_monotonic_and_old_ones_are_pruned(store: Store) -> None:
    ds = await add_dataset(store, records=1)
    run = await add_run(store, [ds])
    for i in range(15):
        await store.append_events(
            run.run_id,
            [NewEvent(EventKind.PROGRESS, {"i": i * 10 + j}, time.time()) for j in range(10)],
        )
    stored = await store.get_run(run.run_id)
    assert stored is not None
    assert stored.last_seq == 151
    assert stored.oldest_seq == 52  # 100 retained
    events = await store.read_events(run.run_id, 0, 1000)
    assert [e.seq for e in events] == list(range(52, 152))
    assert [e.seq for e in await store.read_events(run.run_id, 149, 10)] == [150, 151]
