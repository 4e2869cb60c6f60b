"""The payloads the store itself writes into a run's event log.

Stored as JSON through the type-driven codec and read back as the same frozen
dataclasses; the engine's own payloads (progress snapshots, task evaluations) are
frozen dataclasses of the engine.
"""

from dataclasses import dataclass, field

from evald_server.domain._accounting import RetryCounts
from evald_server.domain._enums import RunState
from evald_server.domain._errors import EvalError


@dataclass(frozen=True, slots=True)
class RunStateChanged:
    """The run entered ``state`` (``previous`` is absent for its first event); the
    event's row names the run."""

    state: RunState
    previous: RunState | None = None
    cancel_requested: bool = False
    retried: int = 0  # subtasks a RetryRun re-queued
    cancel_reason: str | None = None  # why the server cancelled the run (a budget)


@dataclass(frozen=True, slots=True)
class SampleFailure:
    """A subtask that failed for good (retries exhausted, or a permanent error)."""

    subtask_id: str
    task_id: str
    model_id: str
    record_id: str
    record_idx: int
    repeat_index: int
    attempts: int
    error: EvalError
    failures: RetryCounts = field(default_factory=RetryCounts)  # failed attempts per retry class
