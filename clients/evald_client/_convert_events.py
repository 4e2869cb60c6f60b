"""A run's events (``WatchRun``) as typed SDK events; a kind newer than this client is
skipped.
"""

from typing import Any

from evald.v1 import event_pb2
from evald_client._convert_common import (
    eval_error_from_proto,
    retry_counts_from_proto,
    run_state_from_proto,
    seconds,
    timestamp,
)
from evald_client._convert_results import result_from_proto
from evald_client._convert_runs import progress_from_proto
from evald_client._events import (
    Heartbeat,
    ModelActivity,
    Progress,
    RunEvent,
    SampleFailed,
    StateChanged,
    TaskScored,
)


def event_from_proto(message: event_pb2.RunEvent) -> RunEvent | None:
    """The typed event, or ``None`` for a kind newer than this client (skipped)."""
    base: dict[str, Any] = {
        "seq": message.seq,
        "run_id": message.run_id,
        "event_time": timestamp(message, "event_time"),
    }
    kind = message.WhichOneof("kind")
    if kind == "state_changed":
        changed = message.state_changed
        return StateChanged(
            **base,
            state=run_state_from_proto(changed.state),
            previous=run_state_from_proto(changed.previous),
            cancel_requested=changed.cancel_requested,
            cancel_reason=changed.cancel_reason,
        )
    if kind == "progress":
        snapshot = message.progress
        return Progress(
            **base,
            progress=progress_from_proto(snapshot.progress),
            throughput_per_s=snapshot.throughput_per_s,
            eta_s=seconds(snapshot.eta) if snapshot.HasField("eta") else None,
            completed_since_last=snapshot.completed_since_last,
            # Servers before contract 1.1 do not say; they sent a rate only when they had one.
            throughput_known=snapshot.throughput_known or snapshot.throughput_per_s > 0,
            models=tuple(_model_activity(m) for m in snapshot.models),
        )
    if kind == "task_scored":
        return TaskScored(**base, result=result_from_proto(message.task_scored.result))
    if kind == "sample_failed":
        failed = message.sample_failed
        return SampleFailed(
            **base,
            task_id=failed.task_id,
            subtask_id=failed.subtask_id,
            record_id=failed.record_id,
            repeat_index=failed.repeat_index,
            model_id=failed.model_id,
            attempts=failed.attempts,
            error=eval_error_from_proto(failed.error),
            failed_attempts=retry_counts_from_proto(failed.failed_attempts),
        )
    if kind == "heartbeat":
        return Heartbeat(**{**base, "seq": message.heartbeat.current_seq or message.seq})
    return None


def _model_activity(message: event_pb2.ModelActivity) -> ModelActivity:
    return ModelActivity(
        model_id=message.model_id,
        queued=message.queued,
        in_flight=message.in_flight,
        waiting_on=tuple(message.waiting_on),
        stalled_since=timestamp(message, "stalled_since"),
        last_error=(
            eval_error_from_proto(message.last_error) if message.HasField("last_error") else None
        ),
        last_error_time=timestamp(message, "last_error_time"),
        consecutive_failures=message.consecutive_failures,
        concurrency_limit=message.concurrency_limit,
        concurrency_min=message.concurrency_min,
        concurrency_max=message.concurrency_max,
        adaptive=message.adaptive,
        rate_limit_episodes=message.rate_limit_episodes,
        replicas=message.replicas,
        replicas_concurrency_limit=message.replicas_concurrency_limit,
        replicas_rate_limit_episodes=message.replicas_rate_limit_episodes,
    )
