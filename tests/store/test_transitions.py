"""State transitions outside the hot path, on a real SQLite file: cancel (its first
event, a second cancel, a finished or scoring-only run), resume (``requeue_running``),
a model removed from the config (``fail_model_work``) and a task's end (the stored
per-sample scores and ``correct`` flag)."""

import time

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
from evald_server.store import SampleScoreRow, Store, TaskFinish
from tests.store._helpers import Reopen, add_dataset, add_run
from tests.store.test_runs import assert_counters_match_recount, outcome

pytestmark = pytest.mark.anyio


def _finish(
    task_id: str, state: TaskState, scores: list[SampleScoreRow] | None = None
) -> TaskFinish:
    return TaskFinish(
        task_id=task_id,
        state=state,
        result_status=state.value,
        result={"status": state.value},
        sample_scores=scores or [],
        event_payload={"task_id": task_id},
        time=time.time(),
    )


async def test_the_first_cancel_logs_one_state_event_and_a_second_logs_none(
    store: Store, reopen: Reopen
) -> None:
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds])
    await store.claim_ready(run.run_id, "m1", 1, time.time())  # the run is running now
    before = await store.get_run(run.run_id)
    assert before is not None
    first = await store.cancel_run(run.run_id, time.time())
    (event,) = first.events
    assert event.kind is EventKind.RUN_STATE
    assert event.seq == before.last_seq + 1
    assert event.payload["state"] == event.payload["previous"] == RunState.RUNNING.value
    assert event.payload["cancel_requested"] is True
    stored = await store.get_run(run.run_id)
    assert stored is not None
    assert stored.cancel_requested
    assert stored.state is RunState.RUNNING, "the run ends when its running call returns"
    # A restart finishing the cancel: what was requeued is cancelled, no second event.
    store = await reopen(store)
    assert await store.requeue_running(owner=None, now=time.time()) == 1
    again = await store.cancel_run(run.run_id, time.time())
    assert (again.changed, again.events) == (1, ())
    assert again.finished_tasks == (f"{run.run_id}_t0",)
    await assert_counters_match_recount(store, run.run_id)


async def test_cancel_does_not_touch_a_finished_or_scoring_only_run(store: Store) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds])
    items = (await store.claim_ready(run.run_id, "m1", 2, time.time())).subtasks
    done = await store.record_outcomes(
        [outcome(i, OutcomeKind.SUCCEEDED, output="pos") for i in items], time.time()
    )
    task_id = f"{run.run_id}_t0"
    assert done.finished_tasks == (task_id,)
    scoring = await store.get_run(run.run_id)
    assert scoring is not None
    # Only scoring remains: a cancel changes nothing and logs nothing.
    report = await store.cancel_run(run.run_id, time.time())
    assert (report.changed, report.finished_tasks, report.events) == (0, (), ())
    after = await store.get_run(run.run_id)
    assert after is not None
    assert (after.cancel_requested, after.last_seq) == (False, scoring.last_seq)
    finish = await store.finish_task(_finish(task_id, TaskState.SUCCEEDED))
    assert finish.run_state is RunState.SUCCEEDED
    # Finished: a cancel changes nothing either.
    report = await store.cancel_run(run.run_id, time.time())
    assert (report.changed, report.events) == (0, ())
    final = await store.get_run(run.run_id)
    assert final is not None
    assert (final.state, final.cancel_requested) == (RunState.SUCCEEDED, False)


async def test_requeue_running_returns_what_it_gave_back(store: Store) -> None:
    assert await store.requeue_running(owner=None, now=time.time()) == 0
    ds = await add_dataset(store, records=5)
    run = await add_run(store, [ds])
    assert await store.requeue_running(owner=None, now=time.time()) == 0, "nothing running"
    await store.claim_ready(run.run_id, "m1", 3, time.time())
    assert await store.requeue_running(owner="another-process", now=time.time()) == 0
    assert await store.requeue_running(owner=store.owner, now=time.time()) == 3
    task = (await store.get_tasks(run.run_id))[0]
    assert (task.counters.pending, task.counters.running) == (5, 0)
    rows = await store.run_subtasks(run.run_id, None, (SubtaskState.PENDING,), 0, 10)
    assert len(rows) == 5
    assert all(r.attempt == 0 for r in rows), "no retry spent"
    await assert_counters_match_recount(store, run.run_id)


async def test_fail_model_work_fails_that_models_unfinished_subtasks(store: Store) -> None:
    ds = await add_dataset(store, records=4)
    run = await add_run(store, [ds], models=("m1", "gone"))
    kept = (await store.claim_ready(run.run_id, "gone", 2, time.time())).subtasks
    await store.record_outcomes(
        [
            outcome(kept[0], OutcomeKind.SUCCEEDED, output="pos"),
            outcome(kept[1], OutcomeKind.RETRY, error=_ERROR, next_attempt_at=time.time() + 60),
        ],
        time.time(),
    )
    await store.claim_ready(run.run_id, "gone", 1, time.time())  # one left running
    error = EvalError.of(ErrorReason.MODEL_NOT_FOUND, "model 'gone' is no longer configured")
    finished = await store.fail_model_work(run.run_id, "gone", error, time.time())
    assert finished == [f"{run.run_id}_t1"]
    tasks = {t.model_id: t for t in await store.get_tasks(run.run_id)}
    assert tasks["gone"].state is TaskState.SCORING
    assert tasks["gone"].counters == Counters(total=4, succeeded=1, failed_permanent=3)
    assert tasks["m1"].counters == Counters(total=4, pending=4), "the other model untouched"
    failed = await store.run_subtasks(
        run.run_id, f"{run.run_id}_t1", (SubtaskState.FAILED_PERMANENT,), 0, 10
    )
    assert len(failed) == 3
    assert all(r.last_error == error for r in failed)
    firsts = sorted(str(r.first_error.reason) for r in failed if r.first_error is not None)
    assert firsts == sorted([str(error.reason)] * 2 + [str(_ERROR.reason)]), "first kept"
    assert all(r.next_attempt_at is None for r in failed)
    assert await store.fail_model_work(run.run_id, "gone", error, time.time()) == []
    await assert_counters_match_recount(store, run.run_id)


async def test_finish_task_stores_scores_and_the_correct_flag(store: Store) -> None:
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds])
    items = (await store.claim_ready(run.run_id, "m1", 3, time.time())).subtasks
    await store.record_outcomes(
        [outcome(i, OutcomeKind.SUCCEEDED, output="x") for i in items], time.time()
    )
    rows = [
        SampleScoreRow(items[0].row_id, {"accuracy": 1.0}, True, ()),
        SampleScoreRow(items[1].row_id, {"accuracy": 0.0}, False, ("empty",)),
        SampleScoreRow(items[2].row_id, {"rouge_l": 0.5}, None, ()),
    ]
    task_id = f"{run.run_id}_t0"
    finish = await store.finish_task(_finish(task_id, TaskState.SUCCEEDED, rows))
    assert [e.kind for e in finish.events] == [EventKind.TASK_SCORED, EventKind.RUN_STATE]
    stored = {r.row_id: r for r in await store.run_subtasks(run.run_id, None, (), 0, 10)}
    assert stored[items[0].row_id].correct is True
    assert stored[items[1].row_id].correct is False
    assert stored[items[2].row_id].correct is None
    assert stored[items[1].row_id].scores == {"accuracy": 0.0}
    assert stored[items[1].row_id].flags == ("empty",)
    assert stored[items[2].row_id].scores == {"rouge_l": 0.5}
    # A second finish of the same task is refused: nothing is written twice.
    again = await store.finish_task(_finish(task_id, TaskState.FAILED))
    assert (again.events, again.run_state) == ((), None)
    assert (await store.get_task(task_id)).state is TaskState.SUCCEEDED  # type: ignore[union-attr]


_ERROR = EvalError.of(ErrorReason.PROVIDER_HTTP_5XX, "502 from provider")


async def _partial_run(store: Store, models: tuple[str, ...]) -> list[str]:
    """A finished run with one permanent failure per task; returns the task ids."""
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds], models=models)
    task_ids = []
    for model in models:
        items = (await store.claim_ready(run.run_id, model, 2, time.time())).subtasks
        done = await store.record_outcomes(
            [
                outcome(items[0], OutcomeKind.SUCCEEDED, output="ok"),
                outcome(items[1], OutcomeKind.FAILED_PERMANENT, error=_ERROR),
            ],
            time.time(),
        )
        task_ids += done.finished_tasks
    for task_id in task_ids:
        await store.finish_task(_finish(task_id, TaskState.PARTIAL))
    return task_ids


async def test_retry_failed_with_nothing_matching_changes_nothing(store: Store) -> None:
    (task_id,) = await _partial_run(store, ("m1",))
    before = await store.get_run("run_1")
    assert before is not None
    assert before.state is RunState.PARTIAL
    report = await store.retry_failed("run_1", (), ("eval_operator_error",), time.time())
    assert (report.changed, report.events, report.models) == (0, (), ())
    after = await store.get_run("run_1")
    assert after is not None
    assert (after.state, after.last_seq, after.terminal_seq) == (
        RunState.PARTIAL,
        before.last_seq,
        before.terminal_seq,
    )
    assert await store.read_results("run_1") == [(task_id, {"status": "partial"})]


async def test_retry_failed_of_some_tasks_reopens_only_those(store: Store) -> None:
    first, second = await _partial_run(store, ("m1", "m2"))
    report = await store.retry_failed("run_1", (second,), (), time.time())
    assert (report.changed, report.models) == (1, ("m2",))
    (event,) = report.events
    assert event.payload["state"] == RunState.RUNNING.value
    assert event.payload["previous"] == RunState.PARTIAL.value
    assert event.payload["retried"] == 1
    tasks = {t.task_id: t for t in await store.get_tasks("run_1")}
    assert tasks[first].state is TaskState.PARTIAL, "the other task keeps its result"
    assert tasks[second].state is TaskState.RUNNING
    assert tasks[second].result_status is None
    assert tasks[second].counters == Counters(total=2, pending=1, succeeded=1)
    assert [task for task, _ in await store.read_results("run_1")] == [first]
    run = await store.get_run("run_1")
    assert run is not None
    assert (run.state, run.terminal_seq, run.finished_at) == (RunState.RUNNING, None, None)
    assert (await store.claim_ready("run_1", "m1", 9, time.time())).subtasks == ()
    assert len((await store.claim_ready("run_1", "m2", 9, time.time())).subtasks) == 1
    await assert_counters_match_recount(store, "run_1")
