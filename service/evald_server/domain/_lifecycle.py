"""The lifecycle of runs, tasks and subtasks: what their counters are and what may
happen to them. Pure rules, so every store applies the same ones."""

from dataclasses import dataclass
from enum import StrEnum


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
