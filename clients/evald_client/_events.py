"""The events of a run's log, as streamed by ``watch``.

Every event has the ``seq`` of its place in the log; ``Heartbeat`` repeats the current
seq and is not itself logged.
"""

from dataclasses import dataclass, field
from datetime import datetime

from evald_client._enums import RunState
from evald_client._models import EvalError, RetryCounts, RunProgress
from evald_client._results import TaskResult


@dataclass(frozen=True, slots=True, kw_only=True)
class RunEvent:
    """The base of every event variant."""

    seq: int
    run_id: str
    event_time: datetime | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StateChanged(RunEvent):
    """The run changed state; a terminal ``state`` is the stream's last event."""

    state: RunState
    previous: RunState
    cancel_requested: bool = False
    cancel_reason: str = ""  # why the server cancelled the run (its budget)

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelActivity:
    """What one model of the run is doing: the run's queued work and calls in flight,
    the limits holding queued work back, since when the model has been stalled (ready
    work, no call in flight, over the server's threshold), and its recent failures."""

    model_id: str
    queued: int
    in_flight: int
    waiting_on: tuple[str, ...]
    stalled_since: datetime | None
    last_error: EvalError | None
    last_error_time: datetime | None
    consecutive_failures: int
    # The model's concurrency limit now, its adaptive bounds, and rate-limit episodes
    # (0 from a server that does not report them).
    concurrency_limit: int = 0
    concurrency_min: int = 0
    concurrency_max: int = 0
    adaptive: bool = False
    rate_limit_episodes: int = 0
    # Several replicas on one database: how many are live, and the model's concurrency
    # limit and episodes summed over them (a server that does not report them: 0).
    replicas: int = 0
    replicas_concurrency_limit: int = 0
    replicas_rate_limit_episodes: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Progress(RunEvent):
    """A coalesced progress snapshot. ``throughput_per_s`` is what completed over a
    recent window; ``throughput_known`` is False (and ``eta_s`` None) while too little
    has completed to tell."""

    progress: RunProgress
    throughput_per_s: float
    eta_s: float | None
    completed_since_last: int
    throughput_known: bool = True
    models: tuple[ModelActivity, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskScored(RunEvent):
    """A task's result is ready."""

    result: TaskResult


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleFailed(RunEvent):
    """A subtask failed for good; the run goes on."""

    task_id: str
    subtask_id: str
    record_id: str
    repeat_index: int
    model_id: str
    attempts: int
    error: EvalError
    failed_attempts: RetryCounts = field(default_factory=RetryCounts)  # which budget ran out


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(RunEvent):
    """Nothing else happened for a while; ``seq`` is the run's current seq."""
