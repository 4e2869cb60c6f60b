"""The Store port method by method, beyond the scenarios of ``test_runs`` and
``test_transitions``: quotas, idempotent creates, the owner guard, the cancel's effect on
retries, retry filters by reason and state (a cancelled run's failed work alone), a
task's end and the run's terminal event, live-only appends and pagination. Runs against
every backend of ``conftest.BACKENDS``."""

import dataclasses
import time

import anyio
import pytest

from evald_server.domain import (
    ErrorReason,
    EvalError,
    EventKind,
    OutcomeKind,
    RunState,
    SubtaskState,
    TaskState,
    task_outcome,
)
from evald_server.store import (
    LiveRunLimitReached,
    NewEvent,
    SampleScoreRow,
    Store,
    TaskFinish,
    TaskRow,
)
from tests.store._helpers import add_dataset, add_run
from tests.store.test_runs import assert_counters_match_recount, outcome

pytestmark = pytest.mark.anyio

_TIMEOUT = EvalError.of(ErrorReason.PROVIDER_TIMEOUT, "slow")
_REJECTED = EvalError.of(ErrorReason.PROVIDER_REJECTED, "400")


def task_outcome_of(task: TaskRow | None) -> TaskState:
    """The state the engine gives a task that has finished its inference."""
    assert task is not None
    return task_outcome(task.counters, scorer_failed=False)


def _finish(task_id: str, state: TaskState) -> TaskFinish:
    return TaskFinish(
        task_id=task_id,
        state=state,
        result_status=state.value,
        result={"status": state.value},
        event_payload={"task_id": task_id},
        time=time.time(),
    )


async def test_the_live_run_quota_refuses_a_run_and_stores_nothing_of_it(store: Store) -> None:
    ds = await add_dataset(store, records=2)
    await add_run(store, [ds], run_id="run_1", max_live_runs=1)
    with pytest.raises(LiveRunLimitReached) as refused:
        await add_run(store, [ds], run_id="run_2", max_live_runs=1)
    assert (refused.value.live, refused.value.limit) == (1, 1)
    assert await store.get_run("run_2") is None
    assert await store.get_tasks("run_2") == []
    assert await store.live_run_ids() == ["run_1"]


async def test_a_dataset_created_twice_is_stored_once(store: Store) -> None:
    first = await add_dataset(store, name="same", records=3)
    again = await add_dataset(store, name="same", records=3)
    assert again == first
    found = await store.find_dataset("t1", "same", "1.0.0")
    assert found == first
    records = await store.read_records(first.dataset_id, [0, 2])
    assert [r.record_id for r in records] == ["r0", "r2"]


async def test_a_request_id_finds_its_run(store: Store) -> None:
    ds = await add_dataset(store)
    run = await add_run(store, [ds], request_id="req-1", request_hash="h")
    found = await store.find_run_by_request("t1", "req-1")
    assert found is not None
    assert found.run_id == run.run_id
    assert await store.find_run_by_request("t1", "req-2") is None


async def test_outcomes_of_subtasks_this_owner_no_longer_holds_are_ignored(store: Store) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds])
    claimed = (await store.claim_ready(run.run_id, "m1", 2, time.time())).subtasks
    assert await store.requeue_running(owner=store.owner, now=time.time()) == 2
    report = await store.record_outcomes(
        [outcome(c, OutcomeKind.SUCCEEDED) for c in claimed], time.time()
    )
    assert report.applied == 0
    (task,) = await store.get_tasks(run.run_id)
    assert (task.counters.pending, task.counters.succeeded) == (2, 0)
    await assert_counters_match_recount(store, run.run_id)


async def test_a_release_gives_the_subtask_back_without_spending_an_attempt(store: Store) -> None:
    ds = await add_dataset(store, records=1)
    run = await add_run(store, [ds])
    (claimed,) = (await store.claim_ready(run.run_id, "m1", 1, time.time())).subtasks
    await store.record_outcomes([outcome(claimed, OutcomeKind.RELEASED)], time.time())
    (again,) = (await store.claim_ready(run.run_id, "m1", 1, time.time())).subtasks
    assert again.row_id == claimed.row_id
    assert again.attempt == claimed.attempt


async def test_retries_wait_until_due_and_then_are_claimed_again(store: Store) -> None:
    ds = await add_dataset(store, records=1)
    run = await add_run(store, [ds])
    (claimed,) = (await store.claim_ready(run.run_id, "m1", 1, time.time())).subtasks
    due = time.time() + 3600
    report = await store.record_outcomes(
        [outcome(claimed, OutcomeKind.RETRY, error=_TIMEOUT, next_attempt_at=due)], time.time()
    )
    assert [r.next_attempt_at for r in report.retries] == [due]
    waiting = await store.claim_ready(run.run_id, "m1", 1, time.time())
    assert waiting.subtasks == ()
    assert waiting.next_retry_at == due
    (retried,) = (await store.claim_ready(run.run_id, "m1", 1, due + 1)).subtasks
    assert retried.row_id == claimed.row_id
    assert retried.attempt == claimed.attempt + 1


async def test_retry_by_reason_requeues_only_those(store: Store) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds])
    a, b = (await store.claim_ready(run.run_id, "m1", 2, time.time())).subtasks
    await store.record_outcomes(
        [
            outcome(a, OutcomeKind.FAILED_PERMANENT, error=_TIMEOUT),
            outcome(b, OutcomeKind.FAILED_PERMANENT, error=_REJECTED),
        ],
        time.time(),
    )
    report = await store.retry_failed(
        run.run_id, [], [], time.time(), reasons=[ErrorReason.PROVIDER_REJECTED.value]
    )
    assert report.changed == 1
    (task,) = await store.get_tasks(run.run_id)
    assert (task.counters.pending, task.counters.failed_permanent) == (1, 1)
    await assert_counters_match_recount(store, run.run_id)


async def test_retrying_cancelled_work_lifts_the_cancel(store: Store) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds])
    await store.cancel_run(run.run_id, time.time())
    cancelled = await store.get_run(run.run_id)
    assert cancelled is not None
    assert cancelled.cancel_requested
    assert cancelled.counters.cancelled == 2
    report = await store.retry_failed(
        run.run_id, [], [], time.time(), states=[SubtaskState.CANCELLED]
    )
    assert report.changed == 2
    assert report.models == ("m1",)
    reopened = await store.get_run(run.run_id)
    assert reopened is not None
    assert (reopened.state, reopened.cancel_requested) == (RunState.RUNNING, False)
    assert len((await store.claim_ready(run.run_id, "m1", 9, time.time())).subtasks) == 2


async def test_retrying_a_cancelled_runs_failed_work_leaves_its_cancelled_work(
    store: Store,
) -> None:
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds])
    (failed,) = (await store.claim_ready(run.run_id, "m1", 1, time.time())).subtasks
    await store.record_outcomes(
        [outcome(failed, OutcomeKind.FAILED_PERMANENT, error=_REJECTED)], time.time()
    )
    stopped = await store.cancel_run(run.run_id, time.time())
    (task_id,) = stopped.finished_tasks
    ended = await store.finish_task(
        _finish(task_id, task_outcome_of(await store.get_task(task_id)))
    )
    assert ended.run_state is RunState.CANCELLED

    report = await store.retry_failed(
        run.run_id, [], [], time.time(), states=[SubtaskState.FAILED_PERMANENT]
    )
    assert report.changed == 1
    reopened = await store.get_run(run.run_id)
    assert reopened is not None
    assert (reopened.state, reopened.cancel_requested) == (RunState.RUNNING, False)
    (task,) = await store.get_tasks(run.run_id)
    assert (task.counters.pending, task.counters.cancelled) == (1, 2)
    (again,) = (await store.claim_ready(run.run_id, "m1", 9, time.time())).subtasks
    assert (again.row_id, again.attempt) == (failed.row_id, 0)
    done = await store.record_outcomes(
        [outcome(again, OutcomeKind.SUCCEEDED, output="x")], time.time()
    )
    assert done.finished_tasks == (task_id,)
    task = await store.get_task(task_id)
    state = task_outcome_of(task)
    assert state is TaskState.PARTIAL, "two samples stay cancelled"
    finish = await store.finish_task(_finish(task_id, state))
    assert finish.run_state is RunState.PARTIAL
    await assert_counters_match_recount(store, run.run_id)


async def test_the_run_ends_with_its_last_task_and_its_state_event_comes_last(
    store: Store,
) -> None:
    ds = await add_dataset(store, records=1)
    run = await add_run(store, [ds], models=("m1", "m2"))
    for model in ("m1", "m2"):
        (c,) = (await store.claim_ready(run.run_id, model, 1, time.time())).subtasks
        kind = OutcomeKind.SUCCEEDED if model == "m1" else OutcomeKind.FAILED_PERMANENT
        await store.record_outcomes([outcome(c, kind, error=_REJECTED)], time.time())
    assert sorted(await store.scoring_task_ids()) == [f"{run.run_id}_t0", f"{run.run_id}_t1"]
    first = await store.finish_task(_finish(f"{run.run_id}_t0", TaskState.SUCCEEDED))
    assert first.run_state is None
    assert [e.kind for e in first.events] == [EventKind.TASK_SCORED]
    last = await store.finish_task(_finish(f"{run.run_id}_t1", TaskState.FAILED))
    assert last.run_state is RunState.PARTIAL
    assert [e.kind for e in last.events] == [EventKind.TASK_SCORED, EventKind.RUN_STATE]
    assert last.events[1].seq == last.events[0].seq + 1
    ended = await store.get_run(run.run_id)
    assert ended is not None
    assert ended.terminal_seq == last.events[-1].seq == ended.last_seq
    assert ended.finished_at is not None
    # A task finished twice (a retry raced it) changes nothing.
    again = await store.finish_task(_finish(f"{run.run_id}_t1", TaskState.FAILED))
    assert (again.events, again.run_state) == ((), None)
    assert await store.scoring_task_ids() == []


async def test_live_only_appends_nothing_to_a_finished_run(store: Store) -> None:
    ds = await add_dataset(store, records=1)
    run = await add_run(store, [ds])
    await store.cancel_run(run.run_id, time.time())
    await store.finish_task(_finish(f"{run.run_id}_t0", TaskState.CANCELLED))
    ended = await store.get_run(run.run_id)
    assert ended is not None
    assert ended.state is RunState.CANCELLED
    note = NewEvent(EventKind.PROGRESS, {"n": 1}, time.time())
    assert await store.append_events(run.run_id, [note], live_only=True) == []
    (appended,) = await store.append_events(run.run_id, [note])
    assert appended.seq == ended.last_seq + 1


async def test_runs_page_newest_first_and_filter_by_state(store: Store) -> None:
    ds = await add_dataset(store, records=1)
    for i in range(5):
        await add_run(store, [ds], run_id=f"run_{i}")
        await anyio.sleep(0.002)  # distinct creation times
    await store.cancel_run("run_1", time.time())
    await store.finish_task(_finish("run_1_t0", TaskState.CANCELLED))
    first = await store.list_runs("t1", None, 2)
    assert [r.run_id for r in first] == ["run_4", "run_3"]
    after = (first[-1].created_at, first[-1].run_id)
    assert [r.run_id for r in await store.list_runs("t1", after, 9)] == ["run_2", "run_1", "run_0"]
    done = await store.list_runs("t1", None, 9, states=[RunState.CANCELLED])
    assert [r.run_id for r in done] == ["run_1"]
    assert await store.list_runs("t2", None, 9) == []
    counts = await store.state_counts()
    assert counts.runs == {"pending": 4, "cancelled": 1}


async def test_scores_stored_before_a_tasks_end_are_kept_or_cleared_by_its_finish(
    store: Store,
) -> None:
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds], models=("m1", "m2"))
    rows: dict[str, list[int]] = {}
    for model in ("m1", "m2"):
        claimed = (await store.claim_ready(run.run_id, model, 9, time.time())).subtasks
        await store.record_outcomes(
            [outcome(c, OutcomeKind.SUCCEEDED) for c in claimed], time.time()
        )
        rows[model] = sorted(c.row_id for c in claimed)
        first, second, _ = rows[model]
        await store.store_sample_scores(
            [
                SampleScoreRow(first, {"correct": 1.0}, True),
                SampleScoreRow(second, {"correct": 0.0}, False),
            ]
        )

    async def scores(task: int) -> list[tuple[dict[str, float] | None, bool | None]]:
        found = await store.run_subtasks(run.run_id, f"{run.run_id}_t{task}", (), 0, 10)
        return [(r.scores, r.correct) for r in sorted(found, key=lambda r: r.row_id)]

    assert await scores(0) == [({"correct": 1.0}, True), ({"correct": 0.0}, False), (None, None)]
    # The finish writes the last scores beside those stored before.
    kept = dataclasses.replace(
        _finish(f"{run.run_id}_t0", TaskState.SUCCEEDED),
        sample_scores=[SampleScoreRow(rows["m1"][2], {"correct": 1.0}, True)],
    )
    await store.finish_task(kept)
    assert await scores(0) == [
        ({"correct": 1.0}, True),
        ({"correct": 0.0}, False),
        ({"correct": 1.0}, True),
    ]
    # A task that ends without a report keeps none; the other task's stay.
    cleared = dataclasses.replace(_finish(f"{run.run_id}_t1", TaskState.FAILED), clear_scores=True)
    await store.finish_task(cleared)
    assert await scores(1) == [(None, None)] * 3
    assert (await scores(0))[0] == ({"correct": 1.0}, True)
