"""A rescored run on every backend: one store operation copies a finished run's
terminal answers into a new run whose tasks wait in ``scoring`` — all of it or nothing,
idempotent by request id, and found again after a restart."""

import dataclasses
import sqlite3
import time

import asyncpg
import pytest

from evald_server.domain import (
    ErrorReason,
    EvalError,
    EventKind,
    OutcomeKind,
    RunState,
    SubtaskPhase,
    SubtaskState,
    TaskState,
)
from evald_server.store import NewRun, RescoreTask, RunRow, Store, TaskFinish
from tests.store._helpers import Reopen, add_dataset, add_run
from tests.store.test_runs import assert_counters_match_recount, outcome

pytestmark = pytest.mark.anyio

ERROR = EvalError.of(ErrorReason.PROVIDER_HTTP_5XX, "502 from provider")
LOGPROBS = (("A", -0.1), ("B", -2.5))


async def _finished_source(store: Store) -> RunRow:
    """run_1: 4 records x 2 repeats; 5 answers, 2 failed for good, 1 cancelled; scored."""
    ds = await add_dataset(store, records=4)
    run = await add_run(store, [ds], repeat=2)
    claimed = (await store.claim_ready(run.run_id, "m1", 8, time.time())).subtasks
    kinds = [OutcomeKind.SUCCEEDED] * 5 + [OutcomeKind.FAILED_PERMANENT] * 2
    outcomes = [
        outcome(
            item,
            kind,
            output=f"answer {item.record_idx}.{item.repeat_index}",
            top_logprobs=LOGPROBS,
            prompt_tokens=10,
            completion_tokens=3,
            latency_s=0.25,
            call_time_s=0.25,
        )
        if kind is OutcomeKind.SUCCEEDED
        else outcome(item, kind, error=ERROR)
        for item, kind in zip(claimed, kinds, strict=False)
    ]
    outcomes.append(outcome(claimed[7], OutcomeKind.CANCELLED, attempted=False))
    report = await store.record_outcomes(outcomes, time.time())
    assert report.finished_tasks == ("run_1_t0",)
    assert await store.claim_scoring("run_1_t0")
    finish = await store.finish_task(
        TaskFinish(
            task_id="run_1_t0",
            state=TaskState.PARTIAL,
            result_status="partial_success",
            result={"scored": True},
            time=time.time(),
        )
    )
    assert finish.run_state is not None
    source = await store.get_run(run.run_id)
    assert source is not None
    return source


def _rescore(
    run_id: str = "run_2",
    *,
    request_id: str | None = None,
    tasks: tuple[RescoreTask, ...] | None = None,
    keep_logprobs: bool = True,
) -> tuple[NewRun, tuple[RescoreTask, ...]]:
    run = NewRun(
        run_id=run_id,
        tenant="t1",
        name="rescored",
        spec={"models": ["m1"], "rescore_of": "run_1"},
        repeat=2,
        created_at=time.time(),
        request_id=request_id,
        request_hash=None if request_id is None else "h",
    )
    task = RescoreTask(
        task_id=f"{run_id}_t0",
        ordinal=0,
        model_id="m1",
        model={"model_id": "m1"},
        dataset_id="ds_ds",
        source_task_id="run_1_t0",
        keep_logprobs=keep_logprobs,
    )
    return run, (task,) if tasks is None else tasks


async def test_a_rescore_copies_every_terminal_answer_into_a_scoring_task(store: Store) -> None:
    await _finished_source(store)
    run, tasks = _rescore()
    row, created = await store.create_rescore_run(run, tasks)
    assert created
    assert (row.state, row.name) == (RunState.RUNNING, "rescored")
    assert row.spec["rescore_of"] == "run_1"
    (task,) = await store.get_tasks("run_2")
    assert task.state is TaskState.SCORING
    assert (task.counters.total, task.counters.succeeded) == (8, 5)
    assert (task.counters.failed_permanent, task.counters.cancelled) == (2, 1)
    assert task.counters.pending == task.counters.running == 0
    await assert_counters_match_recount(store, "run_2")
    # The answers, in the source's order, with what they cost and how they failed.
    source = await store.task_subtasks("run_1_t0", (), 0, 100)
    copied = await store.task_subtasks("run_2_t0", (), 0, 100)
    assert [(s.record_idx, s.repeat_index, s.state, s.output) for s in copied] == [
        (s.record_idx, s.repeat_index, s.state, s.output) for s in source
    ]
    assert [(s.attempt, s.requests, s.first_error, s.last_error) for s in copied] == [
        (s.attempt, s.requests, s.first_error, s.last_error) for s in source
    ]
    outputs = await store.task_outputs("run_2_t0", 0, 100)
    assert [(o.record_id, o.repeat_index, o.output, o.top_logprobs) for o in outputs] == [
        (o.record_id, o.repeat_index, o.output, o.top_logprobs)
        for o in await store.task_outputs("run_1_t0", 0, 100)
    ]
    assert len(outputs) == 5
    assert {o.top_logprobs for o in outputs} == {LOGPROBS}
    # Nothing to claim: every answer is in. The run logs created, then running.
    assert (await store.claim_ready("run_2", "m1", 10, time.time())).subtasks == ()
    events = await store.read_events("run_2", 0, 10)
    assert [(e.kind, e.payload["state"]) for e in events] == [
        (EventKind.RUN_STATE, "pending"),
        (EventKind.RUN_STATE, "running"),
    ]
    assert "run_2_t0" in await store.scoring_task_ids()
    # The source is untouched.
    source_task = await store.get_task("run_1_t0")
    assert source_task is not None
    assert source_task.state is TaskState.PARTIAL


async def test_a_rescore_that_reads_text_drops_the_log_probabilities(store: Store) -> None:
    await _finished_source(store)
    await store.create_rescore_run(*_rescore(keep_logprobs=False))
    outputs = await store.task_outputs("run_2_t0", 0, 100)
    assert len(outputs) == 5
    assert {o.top_logprobs for o in outputs} == {None}


async def test_a_rescore_is_idempotent_by_request_id(store: Store) -> None:
    await _finished_source(store)
    first, created = await store.create_rescore_run(*_rescore(request_id="again"))
    assert created
    again, _ = await store.create_rescore_run(*_rescore("run_3", request_id="again"))
    assert again.run_id == first.run_id
    assert await store.get_run("run_3") is None
    assert len(await store.task_subtasks("run_2_t0", (), 0, 100)) == 8


async def test_a_rescore_that_fails_half_way_stores_nothing(store: Store) -> None:
    await _finished_source(store)
    run, (good,) = _rescore()
    # The second task's id is taken (the source's own): its insert fails after the
    # first task and its answers were written in the same transaction.
    clash = RescoreTask(
        task_id="run_1_t0",
        ordinal=1,
        model_id="m1",
        model={"model_id": "m1"},
        dataset_id="ds_ds",
        source_task_id="run_1_t0",
    )
    with pytest.raises((sqlite3.IntegrityError, asyncpg.UniqueViolationError)):
        await store.create_rescore_run(run, (good, clash))
    assert await store.get_run("run_2") is None
    assert await store.get_tasks("run_2") == []
    assert await store.task_subtasks("run_2_t0", (), 0, 100) == []
    assert len(await store.task_subtasks("run_1_t0", (), 0, 100)) == 8


async def test_a_rescored_run_is_found_again_after_a_restart(store: Store, reopen: Reopen) -> None:
    await _finished_source(store)
    await store.create_rescore_run(*_rescore())
    store = await reopen(store)
    assert "run_2" in await store.live_run_ids()
    assert "run_2_t0" in await store.scoring_task_ids()
    assert await store.requeue_running(owner=None, now=time.time()) == 0
    copied = await store.task_subtasks("run_2_t0", (), 0, 100)
    assert [s.state for s in copied].count(SubtaskState.SUCCEEDED) == 5


async def test_a_rescore_copies_the_judge_verdicts_linked_to_the_copied_answers(
    store: Store,
) -> None:
    """A judged source: each judge subtask comes along with its verdict (or failure),
    graded answer re-linked to that answer's copy; the judge model has nothing to do."""
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds], judge=("judge", 1))
    answers = (await store.claim_ready(run.run_id, "m1", 3, time.time())).subtasks
    await store.record_outcomes(
        [outcome(a, OutcomeKind.SUCCEEDED, output=f"a{a.record_idx}") for a in answers],
        time.time(),
    )
    judged = sorted(
        (await store.claim_ready(run.run_id, "judge", 10, time.time())).subtasks,
        key=lambda j: j.record_idx,
    )
    verdicts = [4.0, 1.0, None]
    await store.record_outcomes(
        [
            outcome(j, OutcomeKind.SUCCEEDED, output="SCORE", verdict=v, phase=SubtaskPhase.JUDGE)
            if v is not None
            else outcome(
                j,
                OutcomeKind.FAILED_PERMANENT,
                error=EvalError.of(ErrorReason.JUDGE_VERDICT_UNPARSEABLE, "no verdict line"),
                phase=SubtaskPhase.JUDGE,
            )
            for j, v in zip(judged, verdicts, strict=True)
        ],
        time.time(),
    )
    assert await store.claim_scoring("run_1_t0")
    await store.finish_task(
        TaskFinish("run_1_t0", TaskState.PARTIAL, "partial_success", {}, time=time.time())
    )
    new, tasks = _rescore()
    await store.create_rescore_run(dataclasses.replace(new, repeat=1), tasks)

    copied = {o.row_id: o.record_id for o in await store.task_outputs("run_2_t0", 0, 10)}
    source = {o.row_id: o.record_id for o in await store.task_outputs("run_1_t0", 0, 10)}
    again = await store.task_verdicts("run_2_t0", 0, 10)
    before = await store.task_verdicts("run_1_t0", 0, 10)
    assert [(copied[v.judged_row_id], v.state, v.verdict, v.error_reason) for v in again] == [
        (source[v.judged_row_id], v.state, v.verdict, v.error_reason) for v in before
    ]
    (task,) = await store.get_tasks("run_2")
    assert task.state is TaskState.SCORING
    assert (task.counters.total, task.counters.succeeded, task.counters.failed_permanent) == (
        6,
        5,
        1,
    )
    await assert_counters_match_recount(store, "run_2")
    profile = await store.profile_inputs("run_2_t0", phase=SubtaskPhase.JUDGE)
    assert (profile.counters.total, profile.counters.failed_permanent) == (3, 1)
    assert (await store.claim_ready("run_2", "judge", 10, time.time())).subtasks == ()
