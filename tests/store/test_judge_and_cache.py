"""Conformance: the judge phase's subtasks and the response cache, through the port.

Judge subtasks are created in the transaction that records a succeeded answer, counted
in their task (so it is scored only when both phases are terminal), claimed on the
judge model like any subtask, resumed, cancelled and read back apart from the answers.
The cache serves only unexpired entries of the asking scope and evicts the least
recently used beyond its bound."""

import time

import pytest

from evald_server.domain import (
    ErrorReason,
    EvalError,
    OutcomeKind,
    SubtaskPhase,
    SubtaskState,
    TaskState,
)
from evald_server.store import CachedAnswer, CacheEntry, SampleScoreRow, Store, TaskFinish
from tests.store._helpers import Reopen, add_dataset, add_run
from tests.store.test_runs import assert_counters_match_recount, outcome

pytestmark = pytest.mark.anyio
_ERROR = EvalError.of(ErrorReason.PROVIDER_HTTP_5XX, "502 from provider")


async def test_a_succeeded_answer_creates_its_judge_subtasks_pending_and_counted(
    store: Store,
) -> None:
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds], judge=("judge", 2))
    answers = (await store.claim_ready(run.run_id, "m1", 3, time.time())).subtasks
    assert [a.phase for a in answers] == [SubtaskPhase.ANSWER] * 3
    report = await store.record_outcomes(
        [
            outcome(answers[0], OutcomeKind.SUCCEEDED, output="Paris", finish_reason="stop"),
            outcome(answers[1], OutcomeKind.SUCCEEDED, output="Rome", finish_reason="stop"),
            outcome(answers[2], OutcomeKind.FAILED_PERMANENT, error=_ERROR),
        ],
        time.time(),
    )
    assert report.judge_work == ((run.run_id, "judge"),)
    assert report.finished_tasks == (), "the judge phase is not terminal yet"
    (task,) = await store.get_tasks(run.run_id)
    assert task.counters.total == 3 + 2 * 2
    assert task.counters.pending == 4
    await assert_counters_match_recount(store, run.run_id)
    # Nothing for the answering model; the judge model claims both rounds of each answer.
    assert (await store.claim_ready(run.run_id, "m1", 10, time.time())).subtasks == ()
    judged = (await store.claim_ready(run.run_id, "judge", 10, time.time())).subtasks
    assert sorted((j.record_idx, j.judge_round, j.answer) for j in judged) == [
        (0, 0, "Paris"),
        (0, 1, "Paris"),
        (1, 0, "Rome"),
        (1, 1, "Rome"),
    ]
    assert all(j.phase is SubtaskPhase.JUDGE and j.model_id == "judge" for j in judged)
    assert len({j.subtask_id for j in judged}) == 4
    assert judged[0].subtask_id.startswith(f"{task.task_id}.{judged[0].record_idx}.0.j")
    done = await store.record_outcomes(
        [
            outcome(
                j, OutcomeKind.SUCCEEDED, output="ok\nVERDICT: PASS", verdict=1.0, phase=j.phase
            )
            for j in judged
        ],
        time.time(),
    )
    assert done.judge_work == (), "a judge's own success creates no further judging"
    assert done.finished_tasks == (task.task_id,)
    await assert_counters_match_recount(store, run.run_id)


async def test_judge_subtasks_are_read_apart_from_the_answers(store: Store) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds], judge=("judge", 1))
    answers = (await store.claim_ready(run.run_id, "m1", 2, time.time())).subtasks
    answered_at = time.time() + 1.0
    judged_at = answered_at + 5.0  # the judge phase ends well after the answers
    await store.record_outcomes(
        [
            outcome(a, OutcomeKind.SUCCEEDED, output=f"a{a.record_idx}", latency_s=0.5)
            for a in answers
        ],
        answered_at,
    )
    judged = (await store.claim_ready(run.run_id, "judge", 10, time.time())).subtasks
    await store.record_outcomes(
        [
            outcome(
                judged[0],
                OutcomeKind.SUCCEEDED,
                output="fine\nSCORE: 4",
                verdict=4.0,
                phase=SubtaskPhase.JUDGE,
                latency_s=2.0,
                prompt_tokens=100,
                completion_tokens=7,
            ),
            outcome(
                judged[1],
                OutcomeKind.FAILED_PERMANENT,
                error=EvalError.of(ErrorReason.JUDGE_VERDICT_UNPARSEABLE, "no verdict line"),
                phase=SubtaskPhase.JUDGE,
                judge_round=judged[1].judge_round,
            ),
        ],
        judged_at,
    )
    task_id = answers[0].task_id
    listed = await store.run_subtasks(run.run_id, None, (), 0, 10)
    assert [r.phase for r in listed] == [SubtaskPhase.ANSWER] * 2
    judges = await store.run_subtasks(run.run_id, None, (), 0, 10, phase=SubtaskPhase.JUDGE)
    assert [r.verdict for r in judges] == [4.0, None]
    # Both phases at once, in row order (here: the failed judge subtask alone).
    failed = (SubtaskState.FAILED_PERMANENT,)
    for task in (None, answers[0].task_id):
        (both,) = await store.run_subtasks(run.run_id, task, failed, 0, 10, phase=None)
        assert (both.phase, both.row_id) == (SubtaskPhase.JUDGE, judges[1].row_id)
    everything = await store.run_subtasks(run.run_id, None, (), 0, 10, phase=None)
    assert [r.phase for r in everything] == [SubtaskPhase.ANSWER] * 2 + [SubtaskPhase.JUDGE] * 2
    assert await store.task_outputs(task_id, 0, 10) != []
    assert {o.output for o in await store.task_outputs(task_id, 0, 10)} == {"a0", "a1"}
    verdicts = await store.task_verdicts(task_id, 0, 10)
    assert {v.judged_row_id for v in verdicts} == {a.row_id for a in answers}
    assert sorted((v.state, v.verdict, v.error_reason) for v in verdicts) == sorted(
        [
            (SubtaskState.SUCCEEDED, 4.0, None),
            (SubtaskState.FAILED_PERMANENT, None, "judge_verdict_unparseable"),
        ]
    )
    answer_profile = await store.profile_inputs(task_id)
    judge_profile = await store.profile_inputs(task_id, phase=SubtaskPhase.JUDGE)
    assert answer_profile.counters.total == 2
    assert tuple(answer_profile.latencies_s) == (0.5, 0.5)
    assert judge_profile.counters.total == 2
    assert judge_profile.counters.failed_permanent == 1
    assert tuple(judge_profile.latencies_s) == (2.0,)
    assert (judge_profile.prompt_tokens, judge_profile.completion_tokens) == (100, 7)
    assert judge_profile.failure_reasons == (("judge_verdict_unparseable", 1),)
    # Each phase's profile ends with its own last subtask: the answers' wall time does
    # not run on through the judge phase.
    assert answer_profile.finished_at == answered_at
    assert judge_profile.finished_at == judged_at
    (task,) = await store.get_tasks(run.run_id)
    assert task.state is TaskState.SCORING
    finish = TaskFinish(
        task_id=task_id,
        state=TaskState.PARTIAL,
        result_status="partial",
        result={},
        sample_scores=[
            SampleScoreRow(answers[0].row_id, {"accuracy": 1.0}, True, (), {"verdict": 4.0}),
            SampleScoreRow(answers[1].row_id, None, None, (), {"error": "unparseable"}),
        ],
        time=time.time(),
    )
    await store.finish_task(finish)
    rows = await store.run_subtasks(run.run_id, None, (), 0, 10)
    assert [r.judgement for r in rows] == [{"verdict": 4.0}, {"error": "unparseable"}]
    assert [r.scores for r in rows] == [{"accuracy": 1.0}, None]


async def test_judge_subtasks_resume_and_cancel_like_any_subtask(
    store: Store, reopen: Reopen
) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds], judge=("judge", 1))
    answers = (await store.claim_ready(run.run_id, "m1", 2, time.time())).subtasks
    await store.record_outcomes(
        [outcome(a, OutcomeKind.SUCCEEDED, output="x") for a in answers], time.time()
    )
    claimed = (await store.claim_ready(run.run_id, "judge", 1, time.time())).subtasks
    assert len(claimed) == 1
    store = await reopen(store)  # a restart: the judge row claimed before goes back
    assert await store.requeue_running(owner=None, now=time.time()) == 1
    again = (await store.claim_ready(run.run_id, "judge", 10, time.time())).subtasks
    assert len(again) == 2
    assert [j.attempt for j in again] == [0, 0], "a resume spends no attempt"
    store = await reopen(store)
    assert await store.requeue_running(owner=None, now=time.time()) == 2
    report = await store.cancel_run(run.run_id, time.time())
    assert report.changed == 2
    (task,) = await store.get_tasks(run.run_id)
    assert task.counters.cancelled == 2
    assert task.counters.succeeded == 2
    await assert_counters_match_recount(store, run.run_id)


async def test_a_cache_hit_is_stored_and_counted_apart_from_provider_calls(
    store: Store,
) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds])
    first, second = (await store.claim_ready(run.run_id, "m1", 2, time.time())).subtasks
    await store.record_outcomes(
        [
            outcome(first, OutcomeKind.SUCCEEDED, output="x", latency_s=1.0, completion_tokens=3),
            outcome(
                second,
                OutcomeKind.SUCCEEDED,
                output="y",
                attempted=False,
                cache_hit=True,
                finish_reason="stop",
            ),
        ],
        time.time(),
    )
    rows = await store.run_subtasks(run.run_id, None, (), 0, 10)
    assert [(r.cache_hit, r.requests) for r in rows] == [(False, 1), (True, 0)]
    profile = await store.profile_inputs(first.task_id)
    assert profile.cache_hits == 1
    assert profile.requests == 1
    assert tuple(profile.latencies_s) == (1.0,), "a hit is no provider latency"
    assert profile.usage_unknown == 0, "a hit is no call without usage"


def _entry(scope: str, key: str, output: str = "answer") -> CacheEntry:
    return CacheEntry(scope, key, CachedAnswer(output, "stop", 10, 2))


async def test_the_cache_serves_only_its_scope_and_unexpired_entries(store: Store) -> None:
    now = time.time()
    await store.cache_put(
        [_entry("tenant-a", "k1"), _entry("tenant-a", "k2", "two")],
        now,
        ttl_s=60,
        max_entries=10,
    )
    found = await store.cache_lookup("tenant-a", ["k1", "k2", "k3"], now + 1, 60)
    assert found == {
        "k1": CachedAnswer("answer", "stop", 10, 2),
        "k2": CachedAnswer("two", "stop", 10, 2),
    }
    assert await store.cache_lookup("tenant-b", ["k1", "k2"], now + 1, 60) == {}
    assert await store.cache_lookup("tenant-a", ["k1"], now + 61, 60) == {}, "expired"
    # A newer answer under the same key replaces the older one.
    await store.cache_put([_entry("tenant-a", "k1", "newer")], now + 2, ttl_s=60, max_entries=10)
    assert (await store.cache_lookup("tenant-a", ["k1"], now + 3, 60))["k1"].output == "newer"
    # Putting after the TTL deletes what expired.
    evicted = await store.cache_put([_entry("tenant-a", "k9")], now + 200, ttl_s=60, max_entries=10)
    assert evicted == 2
    assert await store.cache_size() == 1


async def test_the_cache_evicts_the_least_recently_used_beyond_its_bound(store: Store) -> None:
    now = time.time()
    for i in range(3):
        await store.cache_put([_entry("t", f"k{i}")], now + i, ttl_s=3600, max_entries=3)
    await store.cache_lookup("t", ["k0"], now + 5, 3600)  # k0 is used again: k1 is oldest
    evicted = await store.cache_put([_entry("t", "k3")], now + 6, ttl_s=3600, max_entries=3)
    assert evicted == 1
    assert await store.cache_size() == 3
    left = await store.cache_lookup("t", ["k0", "k1", "k2", "k3"], now + 7, 3600)
    assert sorted(left) == ["k0", "k2", "k3"]


async def test_an_answer_that_succeeds_after_a_cancel_creates_no_judge_subtask(
    store: Store,
) -> None:
    ds = await add_dataset(store, records=2)
    run = await add_run(store, [ds], judge=("judge", 1))
    answers = (await store.claim_ready(run.run_id, "m1", 2, time.time())).subtasks
    await store.cancel_run(run.run_id, time.time())
    report = await store.record_outcomes(
        [outcome(a, OutcomeKind.SUCCEEDED, output="late") for a in answers], time.time()
    )
    assert report.judge_work == ()
    (task,) = await store.get_tasks(run.run_id)
    assert report.finished_tasks == (task.task_id,), "nothing is left that could run"
    assert task.counters.total == 2
    await assert_counters_match_recount(store, run.run_id)


async def _answered_after_a_cancel(store: Store, records: int, late: int) -> str:
    """A judged run (1 task, ``records`` answers, 2 rounds) whose first ``late`` answers
    succeed after its cancel (no judge rows) and whose others were cancelled; its task
    scored and the run over. Returns the run id."""
    ds = await add_dataset(store, records=records)
    run = await add_run(store, [ds], judge=("judge", 2))
    claimed = (await store.claim_ready(run.run_id, "m1", late, time.time())).subtasks
    await store.cancel_run(run.run_id, time.time())
    report = await store.record_outcomes(
        [outcome(a, OutcomeKind.SUCCEEDED, output=f"late {a.record_idx}") for a in claimed],
        time.time(),
    )
    assert report.judge_work == ()
    (task,) = await store.get_tasks(run.run_id)
    assert task.counters.total == records, "no judge rows under the cancel"
    finish = TaskFinish(task.task_id, TaskState.PARTIAL, "partial_success", {}, time=time.time())
    assert (await store.finish_task(finish)).run_state is not None
    return run.run_id


async def test_a_retry_that_lifts_a_cancel_judges_the_answers_that_succeeded_under_it(
    store: Store,
) -> None:
    run_id = await _answered_after_a_cancel(store, records=4, late=2)
    report = await store.retry_failed(run_id, (), (), time.time(), states=(SubtaskState.CANCELLED,))
    assert report.changed == 2, "the cancelled answers re-queued (judge rows are new work)"
    assert report.models == ("judge", "m1")
    (task,) = await store.get_tasks(run_id)
    assert task.state is TaskState.RUNNING, "to be scored again, with its verdicts"
    assert (task.counters.total, task.counters.pending) == (4 + 2 * 2, 2 + 2 * 2)
    await assert_counters_match_recount(store, run_id)
    judged = (await store.claim_ready(run_id, "judge", 10, time.time())).subtasks
    assert sorted((j.record_idx, j.judge_round, j.answer) for j in judged) == [
        (0, 0, "late 0"),
        (0, 1, "late 0"),
        (1, 0, "late 1"),
        (1, 1, "late 1"),
    ]
    # The re-queued answers get theirs when they succeed, as any answer does.
    answers = (await store.claim_ready(run_id, "m1", 10, time.time())).subtasks
    done = await store.record_outcomes(
        [outcome(a, OutcomeKind.SUCCEEDED, output="now") for a in answers], time.time()
    )
    assert done.judge_work == ((run_id, "judge"),)
    (task,) = await store.get_tasks(run_id)
    assert task.counters.total == 4 + 4 * 2
    await assert_counters_match_recount(store, run_id)


async def test_the_missing_judge_rows_are_made_once_and_only_for_the_retried_tasks(
    store: Store,
) -> None:
    ds = await add_dataset(store, records=3)
    other = await add_dataset(store, name="other", records=3)
    run = await add_run(store, [ds, other], judge=("judge", 1))
    # Three answers of the first task and one of the second succeed after the cancel.
    claimed = (await store.claim_ready(run.run_id, "m1", 4, time.time())).subtasks
    await store.cancel_run(run.run_id, time.time())
    await store.record_outcomes(
        [outcome(a, OutcomeKind.SUCCEEDED, output="late") for a in claimed], time.time()
    )
    first, second = await store.get_tasks(run.run_id)
    # Only the second task is retried: the first keeps its answers unjudged.
    report = await store.retry_failed(
        run.run_id, (second.task_id,), (), time.time(), states=(SubtaskState.CANCELLED,)
    )
    assert report.changed == 2
    first, second = await store.get_tasks(run.run_id)
    assert first.counters.total == 3
    assert second.counters.total == 3 + 1
    judged = (await store.claim_ready(run.run_id, "judge", 10, time.time())).subtasks
    assert [(j.task_id, j.record_idx) for j in judged] == [(second.task_id, 0)]
    # A later retry does not judge an answer twice.
    await store.record_outcomes(
        [outcome(judged[0], OutcomeKind.FAILED_PERMANENT, error=_ERROR, phase=SubtaskPhase.JUDGE)],
        time.time(),
    )
    again = await store.retry_failed(run.run_id, (), (), time.time())
    assert again.changed == 1
    first, second = await store.get_tasks(run.run_id)
    assert second.counters.total == 3 + 1, "the failed judge row re-queued, none added"
    assert first.counters.total == 3 + 3, "the first task's answers judged now"
    await assert_counters_match_recount(store, run.run_id)
