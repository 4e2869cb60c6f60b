"""Progress snapshots and run events, as subscribers see them."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from evald_server.domain import EvalError, ResultStatus, RunState, TaskState, TaskType
from evald_server.engine._results import TaskEvaluation
from evald_server.store import Counters, EventKind, EventRow, RunRow, TaskRow


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

    @classmethod
    def of(cls, task: TaskRow) -> "TaskProgress":
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
        )

    def to_json(self) -> dict[str, Any]:
        return {
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
        )


@dataclass(frozen=True, slots=True)
class RunProgress:
    """Run totals, one row per task, throughput (subtasks/s) and an ETA when known."""

    run_id: str
    state: RunState
    counters: Counters
    tasks: tuple[TaskProgress, ...]
    throughput_per_s: float
    eta_s: float | None
    elapsed_s: float
    completed_since_last: int = 0

    @classmethod
    def of(
        cls,
        run: RunRow,
        tasks: Sequence[TaskRow],
        *,
        throughput_per_s: float = 0.0,
        now: float,
        completed_since_last: int = 0,
    ) -> "RunProgress":
        remaining = run.counters.pending + run.counters.running + run.counters.failed
        eta = remaining / throughput_per_s if throughput_per_s > 0 else None
        return cls(
            run_id=run.run_id,
            state=run.state,
            counters=run.counters,
            tasks=tuple(TaskProgress.of(t) for t in tasks),
            throughput_per_s=throughput_per_s,
            eta_s=0.0 if remaining == 0 else eta,
            elapsed_s=max(0.0, (run.finished_at or now) - (run.started_at or now)),
            completed_since_last=completed_since_last,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "state": self.state.value,
            "counters": self.counters.as_dict(),
            "tasks": [t.to_json() for t in self.tasks],
            "throughput_per_s": self.throughput_per_s,
            "eta_s": self.eta_s,
            "elapsed_s": self.elapsed_s,
            "completed_since_last": self.completed_since_last,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunProgress":
        return cls(
            run_id=data["run_id"],
            state=RunState(data["state"]),
            counters=Counters(**data["counters"]),
            tasks=tuple(TaskProgress.from_json(t) for t in data["tasks"]),
            throughput_per_s=float(data["throughput_per_s"]),
            eta_s=data["eta_s"],
            elapsed_s=float(data["elapsed_s"]),
            completed_since_last=int(data.get("completed_since_last", 0)),
        )


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


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One entry of a run's event log; exactly one of the optional parts is set, except
    for heartbeats (not stored), which carry only the seq of the last event sent."""

    run_id: str
    seq: int
    time: float
    kind: EventKind
    run_state: RunState | None = None
    previous_state: RunState | None = None
    cancel_requested: bool = False
    progress: RunProgress | None = None
    evaluation: TaskEvaluation | None = None
    sample_failure: SampleFailure | None = None

    @property
    def is_terminal(self) -> bool:
        return self.run_state is not None and self.run_state.is_terminal

    @classmethod
    def from_row(cls, row: EventRow) -> "RunEvent":
        event = cls(run_id=row.run_id, seq=row.seq, time=row.time, kind=row.kind)
        payload = row.payload
        if row.kind is EventKind.RUN_STATE:
            return replace(
                event,
                run_state=RunState(payload["state"]),
                previous_state=RunState(payload["previous"]) if "previous" in payload else None,
                cancel_requested=bool(payload.get("cancel_requested", False)),
            )
        if row.kind is EventKind.PROGRESS:
            return replace(event, progress=RunProgress.from_json(payload))
        if row.kind is EventKind.TASK_SCORED:
            return replace(event, evaluation=TaskEvaluation.from_json(payload))
        if row.kind is EventKind.SAMPLE_FAILED:
            failure = SampleFailure(
                subtask_id=payload["subtask_id"],
                task_id=payload["task_id"],
                model_id=payload["model_id"],
                record_id=payload["record_id"],
                record_idx=int(payload["record_idx"]),
                repeat_index=int(payload["repeat_index"]),
                attempts=int(payload["attempts"]),
                error=EvalError.from_json(payload["error"]),
            )
            return replace(event, sample_failure=failure)
        return event

    @classmethod
    def heartbeat(cls, run_id: str, seq: int, time: float) -> "RunEvent":
        return cls(run_id=run_id, seq=seq, time=time, kind=EventKind.HEARTBEAT)
