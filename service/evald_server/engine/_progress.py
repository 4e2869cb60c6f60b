"""Progress snapshots and run events, as subscribers see them.

What the counts mean: the store's ``running`` counts subtasks *claimed* by the engine
(in its dispatch buffer or calling the provider); a snapshot also carries, per task,
how many of them have a provider call in flight (``in_flight``), so that the contract's
RUNNING ("a provider call is in flight") and QUEUED ("claimed, waiting for a slot") are
told apart without a store write per call.
"""

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evald_server.domain import (
    Cost,
    Counters,
    EvalError,
    ResultStatus,
    RunState,
    TaskState,
    TaskType,
    from_jsonable,
    to_jsonable,
)
from evald_server.store import RunRow, TaskRow


@dataclass(frozen=True, slots=True)
class TaskProgress:
    task_id: str
    model_id: str
    dataset_id: str
    dataset_name: str
    dataset_version: str
    task_type: TaskType
    state: TaskState
    counters: Counters
    result_status: ResultStatus | None
    in_flight: int = 0  # of counters.running: provider calls in flight

    @property
    def queued(self) -> int:
        """Claimed subtasks that wait for a worker or a limit slot."""
        return max(0, self.counters.running - self.in_flight)

    @classmethod
    def of(cls, task: TaskRow, in_flight: int = 0) -> "TaskProgress":
        return cls(
            task_id=task.task_id,
            model_id=task.model_id,
            dataset_id=task.dataset_id,
            dataset_name=task.dataset_name,
            dataset_version=task.dataset_version,
            task_type=task.task_type,
            state=task.state,
            counters=task.counters,
            result_status=None if task.result_status is None else ResultStatus(task.result_status),
            in_flight=min(in_flight, task.counters.running),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "in_flight": self.in_flight,
            "task_id": self.task_id,
            "model_id": self.model_id,
            "dataset_id": self.dataset_id,
            "dataset_name": self.dataset_name,
            "dataset_version": self.dataset_version,
            "task_type": self.task_type.value,
            "state": self.state.value,
            "counters": self.counters.as_dict(),
            "result_status": None if self.result_status is None else self.result_status.value,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TaskProgress":
        status = data.get("result_status")
        return cls(
            task_id=data["task_id"],
            model_id=data["model_id"],
            dataset_id=data["dataset_id"],
            dataset_name=data["dataset_name"],
            dataset_version=data["dataset_version"],
            task_type=TaskType(data["task_type"]),
            state=TaskState(data["state"]),
            counters=Counters(**data["counters"]),
            result_status=None if status is None else ResultStatus(status),
            # Snapshots written before calls were counted apart: every claim was running.
            in_flight=int(data.get("in_flight", data["counters"]["running"])),
        )


@dataclass(frozen=True, slots=True)
class ModelActivity:
    """What one model of a run is doing: this run's queued work and calls, which limits
    hold its queued work back, since when the model's lane has had ready work and no
    call (once that is longer than the stall threshold), and the model's recent
    failures (over every run: a model that cannot be reached fails for all)."""

    model_id: str
    queued: int
    in_flight: int
    waiting_on: tuple[str, ...] = ()
    stalled_since: float | None = None
    last_error: EvalError | None = None
    last_error_at: float | None = None
    consecutive_failures: int = 0
    # The model's rate control (shared by every run): its concurrency limit now, the
    # bounds adaptive concurrency moves it in, and the rate-limit episodes so far.
    concurrency_limit: int = 0
    concurrency_min: int = 0
    concurrency_max: int = 0
    adaptive: bool = False
    rate_limit_episodes: int = 0
    # Over the live replicas of a shared store (this one alone: 1, and its own figures).
    replicas: int = 1
    replicas_concurrency_limit: int = 0
    replicas_rate_limit_episodes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "queued": self.queued,
            "in_flight": self.in_flight,
            "waiting_on": list(self.waiting_on),
            "stalled_since": self.stalled_since,
            "last_error": None if self.last_error is None else self.last_error.to_json(),
            "last_error_at": self.last_error_at,
            "consecutive_failures": self.consecutive_failures,
            "concurrency_limit": self.concurrency_limit,
            "concurrency_min": self.concurrency_min,
            "concurrency_max": self.concurrency_max,
            "adaptive": self.adaptive,
            "rate_limit_episodes": self.rate_limit_episodes,
            "replicas": self.replicas,
            "replicas_concurrency_limit": self.replicas_concurrency_limit,
            "replicas_rate_limit_episodes": self.replicas_rate_limit_episodes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ModelActivity":
        error = data.get("last_error")
        return cls(
            model_id=data["model_id"],
            queued=int(data["queued"]),
            in_flight=int(data["in_flight"]),
            waiting_on=tuple(data.get("waiting_on", ())),
            stalled_since=data.get("stalled_since"),
            last_error=None if error is None else EvalError.from_json(error),
            last_error_at=data.get("last_error_at"),
            consecutive_failures=int(data.get("consecutive_failures", 0)),
            concurrency_limit=int(data.get("concurrency_limit", 0)),
            concurrency_min=int(data.get("concurrency_min", 0)),
            concurrency_max=int(data.get("concurrency_max", 0)),
            adaptive=bool(data.get("adaptive", False)),
            rate_limit_episodes=int(data.get("rate_limit_episodes", 0)),
            replicas=int(data.get("replicas", 1)),
            replicas_concurrency_limit=int(data.get("replicas_concurrency_limit", 0)),
            replicas_rate_limit_episodes=int(data.get("replicas_rate_limit_episodes", 0)),
        )


@dataclass(frozen=True, slots=True)
class RunProgress:
    """Run totals, one row per task, throughput (subtasks/s) and an ETA when known, and
    one row per model of the run (its lane's activity) in snapshots."""

    run_id: str
    state: RunState
    counters: Counters
    tasks: tuple[TaskProgress, ...]
    throughput_per_s: float
    eta_s: float | None
    elapsed_s: float
    completed_since_last: int = 0
    throughput_known: bool = False  # False: too little has completed to estimate
    models: tuple[ModelActivity, ...] = ()
    cost: Cost = field(default_factory=Cost)  # of the run's successful calls so far

    @property
    def in_flight(self) -> int:
        return sum(t.in_flight for t in self.tasks)

    @property
    def queued(self) -> int:
        return max(0, self.counters.running - self.in_flight)

    @classmethod
    def of(
        cls,
        run: RunRow,
        tasks: Sequence[TaskRow],
        *,
        throughput_per_s: float | None = None,
        now: float,
        completed_since_last: int = 0,
        calls: Mapping[str, int] | None = None,
        models: Sequence[ModelActivity] = (),
    ) -> "RunProgress":
        """``throughput_per_s`` None: not known yet (no ETA); ``calls``: provider calls
        in flight per task."""
        calls = calls or {}
        remaining = run.counters.pending + run.counters.running + run.counters.failed
        known = throughput_per_s is not None and throughput_per_s > 0
        eta = remaining / throughput_per_s if known and throughput_per_s else None
        return cls(
            run_id=run.run_id,
            state=run.state,
            counters=run.counters,
            tasks=tuple(TaskProgress.of(t, calls.get(t.task_id, 0)) for t in tasks),
            throughput_per_s=throughput_per_s or 0.0,
            eta_s=0.0 if remaining == 0 else eta,
            elapsed_s=max(0.0, (run.finished_at or now) - (run.started_at or now)),
            completed_since_last=completed_since_last,
            throughput_known=known,
            models=tuple(models),
            cost=dataclasses.replace(run.cost, priced=all("price" in t.model for t in tasks)),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "state": self.state.value,
            "counters": self.counters.as_dict(),
            "tasks": [t.to_json() for t in self.tasks],
            "throughput_per_s": self.throughput_per_s,
            "throughput_known": self.throughput_known,
            "eta_s": self.eta_s,
            "elapsed_s": self.elapsed_s,
            "completed_since_last": self.completed_since_last,
            "models": [m.to_json() for m in self.models],
            "cost": to_jsonable(self.cost),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunProgress":
        throughput = float(data["throughput_per_s"])
        return cls(
            run_id=data["run_id"],
            state=RunState(data["state"]),
            counters=Counters(**data["counters"]),
            tasks=tuple(TaskProgress.from_json(t) for t in data["tasks"]),
            throughput_per_s=throughput,
            eta_s=data["eta_s"],
            elapsed_s=float(data["elapsed_s"]),
            completed_since_last=int(data.get("completed_since_last", 0)),
            throughput_known=bool(data.get("throughput_known", throughput > 0)),
            models=tuple(ModelActivity.from_json(m) for m in data.get("models", ())),
            cost=from_jsonable(Cost, data["cost"]) if "cost" in data else Cost(),
        )
