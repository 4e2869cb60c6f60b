"""The lifecycle of runs, tasks and subtasks: what their counters are and what may
happen to them. Pure rules, so every store applies the same ones."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from evald_server.domain._enums import ResultStatus, RunState, SubtaskState, TaskState


class EventKind(StrEnum):
    """The kinds of entries in a run's event log (heartbeats are never stored)."""

    RUN_STATE = "run_state"
    PROGRESS = "progress"
    TASK_SCORED = "task_scored"
    SAMPLE_FAILED = "sample_failed"
    HEARTBEAT = "heartbeat"


class OutcomeKind(StrEnum):
    """What happened to one claimed subtask."""

    SUCCEEDED = "succeeded"
    RETRY = "retry"  # failed, retried at next_attempt_at
    FAILED_PERMANENT = "failed_permanent"
    CANCELLED = "cancelled"
    RELEASED = "released"  # given back unattempted (drain): pending again, no retry spent


class SubtaskPhase(IntEnum):
    """Which phase of a task a subtask belongs to (stored as its integer)."""

    ANSWER = 0  # the evaluated model answers a record
    JUDGE = 1  # a judge model grades one answer (one subtask per judging round)


@dataclass(frozen=True, slots=True)
class Counters:
    """How many subtasks are in each state; ``failed`` ones wait for their retry."""

    total: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    failed_permanent: int = 0
    cancelled: int = 0

    @property
    def terminal(self) -> int:
        return self.succeeded + self.failed_permanent + self.cancelled

    @property
    def all_terminal(self) -> bool:
        return self.terminal == self.total

    def as_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "pending": self.pending,
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "failed_permanent": self.failed_permanent,
            "cancelled": self.cancelled,
        }


# --- Subtasks -----------------------------------------------------------------------

_S = SubtaskState

SUBTASK_TRANSITIONS: Mapping[SubtaskState, frozenset[SubtaskState]] = {
    # claimed; cancelled by a cancel; failed when its model is gone after a restart
    _S.PENDING: frozenset({_S.RUNNING, _S.CANCELLED, _S.FAILED_PERMANENT}),
    # an outcome, or given back unattempted (drain, restart)
    _S.RUNNING: frozenset({_S.SUCCEEDED, _S.FAILED, _S.FAILED_PERMANENT, _S.CANCELLED, _S.PENDING}),
    # claimed again when its retry is due; cancelled; failed when its model is gone
    _S.FAILED: frozenset({_S.RUNNING, _S.CANCELLED, _S.FAILED_PERMANENT}),
    # re-queued by RetryRun with a fresh budget
    _S.FAILED_PERMANENT: frozenset({_S.PENDING}),
    _S.CANCELLED: frozenset({_S.PENDING}),
    _S.SUCCEEDED: frozenset(),
}
"""Which subtask state may follow which; a store moves a subtask along these only."""


def can_move(source: SubtaskState, target: SubtaskState) -> bool:
    return target in SUBTASK_TRANSITIONS[source]


RETRYABLE_STATES: tuple[SubtaskState, ...] = (_S.FAILED_PERMANENT, _S.CANCELLED)
"""The states RetryRun re-queues (each with a fresh retry budget), as a finished run's
client picks them: failed_permanent by default. A retry lifts the run's cancel, since
what it re-queues must run; of a cancelled run, the subtasks not picked stay cancelled,
and the run ends in the state its tasks give (``derive_run_state``: partial while some
cancelled samples remain beside succeeded ones)."""


OUTCOME_TARGET: Mapping[OutcomeKind, SubtaskState] = {
    OutcomeKind.SUCCEEDED: _S.SUCCEEDED,
    OutcomeKind.RETRY: _S.FAILED,
    OutcomeKind.FAILED_PERMANENT: _S.FAILED_PERMANENT,
    OutcomeKind.CANCELLED: _S.CANCELLED,
    OutcomeKind.RELEASED: _S.PENDING,
}
"""The state a ``running`` subtask moves to for each outcome."""


def effective_outcome(kind: OutcomeKind, *, cancel_requested: bool) -> OutcomeKind:
    """The outcome a store records: a cancelled run schedules no more retries."""
    if kind is OutcomeKind.RETRY and cancel_requested:
        return OutcomeKind.CANCELLED
    return kind


def spends_attempt(kind: OutcomeKind, *, attempted: bool) -> bool:
    """Whether the outcome uses up one of the subtask's retry budget."""
    return attempted and kind not in (OutcomeKind.CANCELLED, OutcomeKind.RELEASED)


def judge_subtasks_due(
    kind: OutcomeKind, phase: SubtaskPhase, judge_rounds: int, *, cancel_requested: bool
) -> int:
    """How many judge subtasks an outcome creates: one per judging round for an answer
    that succeeded in a judged task; none otherwise, and none in a cancelled run (they
    could never be claimed, and the task would never end; a retry that lifts the cancel
    creates them then). They are created pending in the transaction that records the
    answer, so judging overlaps inference and a crash loses none of them. The task
    counts them like any subtask, so a judged task is scored only once both phases are
    terminal."""
    if kind is OutcomeKind.SUCCEEDED and phase is SubtaskPhase.ANSWER and not cancel_requested:
        return judge_rounds
    return 0


# --- Tasks --------------------------------------------------------------------------


def inference_finished(counters: Counters) -> bool:
    """A task's inference is over when none of its subtasks is pending, claimed or
    waiting for a retry; it is then scored."""
    return counters.pending == 0 and counters.running == 0 and counters.failed == 0


def task_ready_for_scoring(state: TaskState, counters: Counters) -> bool:
    """Whether a task moves to ``scoring`` now (once: only from pending or running)."""
    return state in (TaskState.PENDING, TaskState.RUNNING) and inference_finished(counters)


def task_outcome(
    counters: Counters, *, scorer_failed: bool, unjudged: int = 0, unscorable: int = 0
) -> TaskState:
    """A task's final state from its subtask counters; ``unjudged``: answers a judged
    task's judge could not grade (or never graded); ``unscorable``: successes its scorer
    raised on and left out. Either leaves the task partial at best."""
    if scorer_failed:
        return TaskState.FAILED
    if counters.succeeded == 0:
        only_cancelled = counters.cancelled > 0 and counters.failed_permanent == 0
        return TaskState.CANCELLED if only_cancelled else TaskState.FAILED
    if counters.succeeded == counters.total and unjudged == 0 and unscorable == 0:
        return TaskState.SUCCEEDED
    return TaskState.PARTIAL


RESULT_STATUS: Mapping[TaskState, ResultStatus] = {
    TaskState.SUCCEEDED: ResultStatus.SUCCESS,
    TaskState.PARTIAL: ResultStatus.PARTIAL_SUCCESS,
    TaskState.FAILED: ResultStatus.FAILED,
    TaskState.CANCELLED: ResultStatus.CANCELLED,
}
"""The result status a finished task's evaluation carries."""


# --- Runs ---------------------------------------------------------------------------


def derive_run_state(states: Sequence[TaskState], *, cancel_requested: bool) -> RunState:
    """A finished run's state from its tasks' states."""
    if cancel_requested:
        return RunState.CANCELLED
    if all(s is TaskState.SUCCEEDED for s in states):
        return RunState.SUCCEEDED
    if all(s is TaskState.FAILED for s in states):
        return RunState.FAILED
    if all(s is TaskState.CANCELLED for s in states):
        return RunState.CANCELLED
    return RunState.PARTIAL


def run_state_if_done(states: Sequence[TaskState], *, cancel_requested: bool) -> RunState | None:
    """The run's final state once every task is terminal, else ``None``."""
    if not all(s.is_terminal for s in states):
        return None
    return derive_run_state(states, cancel_requested=cancel_requested)
