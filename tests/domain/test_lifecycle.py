"""The lifecycle rules as tables: every subtask transition, every outcome, when a task's
inference is over, a task's final state from its counters and a run's from its tasks."""

import pytest

from evald_server.domain import (
    OUTCOME_TARGET,
    RESULT_STATUS,
    SUBTASK_TRANSITIONS,
    Counters,
    OutcomeKind,
    ResultStatus,
    RunState,
    SubtaskState,
    TaskState,
    can_move,
    derive_run_state,
    effective_outcome,
    inference_finished,
    run_state_if_done,
    spends_attempt,
    task_outcome,
    task_ready_for_scoring,
)

S = SubtaskState
T = TaskState

# (source, target, legal): the whole 6 × 6 table, written out so that a new edge is a
# deliberate change here.
_LEGAL = {
    (S.PENDING, S.RUNNING),  # claimed
    (S.PENDING, S.CANCELLED),  # CancelRun
    (S.PENDING, S.FAILED_PERMANENT),  # its model left the config
    (S.RUNNING, S.SUCCEEDED),
    (S.RUNNING, S.FAILED),  # waits for its retry
    (S.RUNNING, S.FAILED_PERMANENT),
    (S.RUNNING, S.CANCELLED),
    (S.RUNNING, S.PENDING),  # released by a drain, requeued after a crash
    (S.FAILED, S.RUNNING),  # its retry is due
    (S.FAILED, S.CANCELLED),
    (S.FAILED, S.FAILED_PERMANENT),
    (S.FAILED_PERMANENT, S.PENDING),  # RetryRun
    (S.CANCELLED, S.PENDING),  # RetryRun of cancelled subtasks
}


@pytest.mark.parametrize(("source", "target"), [(a, b) for a in S for b in S])
def test_subtask_transitions_are_exactly_the_table(source: S, target: S) -> None:
    assert can_move(source, target) is ((source, target) in _LEGAL)


def test_a_succeeded_subtask_never_moves_and_every_state_is_covered() -> None:
    assert SUBTASK_TRANSITIONS[S.SUCCEEDED] == frozenset()
    assert set(SUBTASK_TRANSITIONS) == set(S)


@pytest.mark.parametrize(
    ("kind", "target"),
    [
        (OutcomeKind.SUCCEEDED, S.SUCCEEDED),
        (OutcomeKind.RETRY, S.FAILED),
        (OutcomeKind.FAILED_PERMANENT, S.FAILED_PERMANENT),
        (OutcomeKind.CANCELLED, S.CANCELLED),
        (OutcomeKind.RELEASED, S.PENDING),
    ],
)
def test_each_outcome_moves_a_running_subtask_along_a_legal_edge(
    kind: OutcomeKind, target: S
) -> None:
    assert OUTCOME_TARGET[kind] is target
    assert can_move(S.RUNNING, target)


@pytest.mark.parametrize(
    ("kind", "cancel_requested", "recorded", "attempted", "spent"),
    [
        (OutcomeKind.RETRY, False, OutcomeKind.RETRY, True, True),
        (OutcomeKind.RETRY, True, OutcomeKind.CANCELLED, True, False),  # no retry after cancel
        (OutcomeKind.SUCCEEDED, True, OutcomeKind.SUCCEEDED, True, True),
        (OutcomeKind.FAILED_PERMANENT, True, OutcomeKind.FAILED_PERMANENT, True, True),
        (OutcomeKind.FAILED_PERMANENT, False, OutcomeKind.FAILED_PERMANENT, False, False),
        (OutcomeKind.CANCELLED, False, OutcomeKind.CANCELLED, True, False),
        (OutcomeKind.RELEASED, False, OutcomeKind.RELEASED, False, False),
    ],
)
def test_the_recorded_outcome_and_whether_it_spends_an_attempt(
    kind: OutcomeKind, cancel_requested: bool, recorded: OutcomeKind, attempted: bool, spent: bool
) -> None:
    assert effective_outcome(kind, cancel_requested=cancel_requested) is recorded
    assert spends_attempt(recorded, attempted=attempted) is spent


@pytest.mark.parametrize(
    ("counters", "finished"),
    [
        (Counters(total=3, succeeded=3), True),
        (Counters(total=3, succeeded=1, failed_permanent=1, cancelled=1), True),
        (Counters(total=3, cancelled=3), True),
        (Counters(total=0), True),
        (Counters(total=3, succeeded=2, pending=1), False),
        (Counters(total=3, succeeded=2, running=1), False),
        (Counters(total=3, succeeded=2, failed=1), False),  # waiting for its retry
    ],
)
def test_a_tasks_inference_is_finished_when_nothing_is_left_to_execute(
    counters: Counters, finished: bool
) -> None:
    assert inference_finished(counters) is finished


@pytest.mark.parametrize(
    ("state", "ready"),
    [
        (T.PENDING, True),  # every subtask cancelled before any claim
        (T.RUNNING, True),
        (T.SCORING, False),  # already handed to scoring: only once
        (T.SUCCEEDED, False),
        (T.PARTIAL, False),
        (T.FAILED, False),
        (T.CANCELLED, False),
    ],
)
def test_a_task_moves_to_scoring_once(state: T, ready: bool) -> None:
    assert task_ready_for_scoring(state, Counters(total=1, succeeded=1)) is ready
    assert not task_ready_for_scoring(state, Counters(total=1, running=1))


@pytest.mark.parametrize(
    ("counters", "scorer_failed", "expected"),
    [
        (Counters(total=3, succeeded=3), False, T.SUCCEEDED),
        (Counters(total=3, succeeded=2, failed_permanent=1), False, T.PARTIAL),
        (Counters(total=3, succeeded=1, cancelled=2), False, T.PARTIAL),
        (Counters(total=3, cancelled=3), False, T.CANCELLED),
        (Counters(total=3, failed_permanent=3), False, T.FAILED),
        (Counters(total=3, failed_permanent=1, cancelled=2), False, T.FAILED),
        (Counters(total=3, succeeded=3), True, T.FAILED),
    ],
)
def test_a_tasks_final_state_follows_its_counters(
    counters: Counters, scorer_failed: bool, expected: T
) -> None:
    state = task_outcome(counters, scorer_failed=scorer_failed)
    assert state is expected
    assert state.is_terminal


def test_a_task_with_unjudged_answers_is_partial() -> None:
    every_call_succeeded = Counters(total=4, succeeded=4)
    assert task_outcome(every_call_succeeded, scorer_failed=False, unjudged=0) is T.SUCCEEDED
    assert task_outcome(every_call_succeeded, scorer_failed=False, unjudged=1) is T.PARTIAL
    assert task_outcome(every_call_succeeded, scorer_failed=True, unjudged=1) is T.FAILED
    nothing = Counters(total=4, cancelled=4)
    assert task_outcome(nothing, scorer_failed=False, unjudged=1) is T.CANCELLED


def test_every_final_task_state_has_a_result_status() -> None:
    assert RESULT_STATUS == {
        T.SUCCEEDED: ResultStatus.SUCCESS,
        T.PARTIAL: ResultStatus.PARTIAL_SUCCESS,
        T.FAILED: ResultStatus.FAILED,
        T.CANCELLED: ResultStatus.CANCELLED,
    }
    assert set(RESULT_STATUS) == {t for t in T if t.is_terminal}


@pytest.mark.parametrize(
    ("states", "cancel_requested", "expected"),
    [
        ((T.SUCCEEDED, T.SUCCEEDED), False, RunState.SUCCEEDED),
        ((T.SUCCEEDED, T.PARTIAL), False, RunState.PARTIAL),
        ((T.SUCCEEDED, T.FAILED), False, RunState.PARTIAL),
        ((T.FAILED, T.FAILED), False, RunState.FAILED),
        ((T.CANCELLED, T.CANCELLED), False, RunState.CANCELLED),
        ((T.CANCELLED, T.FAILED), False, RunState.PARTIAL),
        ((T.SUCCEEDED,), True, RunState.CANCELLED),
        ((T.PARTIAL, T.FAILED), True, RunState.CANCELLED),
    ],
)
def test_a_finished_runs_state_follows_its_tasks(
    states: tuple[T, ...], cancel_requested: bool, expected: RunState
) -> None:
    assert derive_run_state(states, cancel_requested=cancel_requested) is expected
    assert run_state_if_done(states, cancel_requested=cancel_requested) is expected


@pytest.mark.parametrize("unfinished", [T.PENDING, T.RUNNING, T.SCORING])
def test_a_run_with_an_unfinished_task_has_no_final_state(unfinished: T) -> None:
    assert run_state_if_done((T.SUCCEEDED, unfinished), cancel_requested=False) is None
    assert run_state_if_done((T.SUCCEEDED, unfinished), cancel_requested=True) is None
