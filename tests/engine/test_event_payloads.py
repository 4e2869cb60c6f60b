"""Every stored event kind reads back as its frozen payload dataclass, from what the
store writes now (through the codec) and from what it wrote before (plain dicts)."""

from evald_server.domain import (
    Counters,
    ErrorReason,
    EvalError,
    EventKind,
    RunState,
    RunStateChanged,
    SampleFailure,
    to_jsonable,
)
from evald_server.engine import RunEvent, RunProgress
from evald_server.store import EventRow, Json


def _read(kind: EventKind, payload: Json) -> RunEvent:
    return RunEvent.from_row(EventRow(run_id="r", seq=3, time=1.5, kind=kind, payload=payload))


_FAILURE = SampleFailure(
    subtask_id="t:0:0",
    task_id="t",
    model_id="m",
    record_id="rec-0",
    record_idx=0,
    repeat_index=0,
    attempts=3,
    error=EvalError.of(ErrorReason.PROVIDER_TIMEOUT, "took too long", after_s=30),
)


def test_a_state_change_round_trips_through_the_codec() -> None:
    change = RunStateChanged(RunState.CANCELLED, RunState.RUNNING, cancel_requested=True)
    event = _read(EventKind.RUN_STATE, to_jsonable(change))
    assert event.body == change
    assert event.run_state is RunState.CANCELLED
    assert event.is_terminal


def test_a_sample_failure_round_trips_through_the_codec() -> None:
    event = _read(EventKind.SAMPLE_FAILED, to_jsonable(_FAILURE))
    assert event.body == _FAILURE == event.sample_failure
    assert event.run_state is None
    assert event.progress is None
    assert event.evaluation is None


def test_payloads_written_before_the_codec_still_read_back() -> None:
    first = _read(EventKind.RUN_STATE, {"run_id": "r", "state": "pending"})
    assert first.body == RunStateChanged(RunState.PENDING)
    retried = _read(
        EventKind.RUN_STATE,
        {"run_id": "r", "state": "running", "previous": "partial", "retried": 2},
    )
    assert retried.body == RunStateChanged(RunState.RUNNING, RunState.PARTIAL, retried=2)
    legacy = {
        "subtask_id": "t:0:0",
        "task_id": "t",
        "model_id": "m",
        "record_id": "rec-0",
        "record_idx": 0,
        "repeat_index": 0,
        "attempts": 3,
        "error": _FAILURE.error.to_json(),
    }
    assert _read(EventKind.SAMPLE_FAILED, legacy).body == _FAILURE


def test_a_progress_snapshot_reads_back_as_one() -> None:
    progress = RunProgress(
        run_id="r",
        state=RunState.RUNNING,
        counters=Counters(total=4, pending=1, running=1, succeeded=2),
        tasks=(),
        throughput_per_s=2.0,
        eta_s=1.0,
        elapsed_s=3.0,
        completed_since_last=2,
        throughput_known=True,
        models=(),
    )
    event = _read(EventKind.PROGRESS, progress.to_json())
    assert event.body == progress == event.progress


def test_a_heartbeat_has_no_payload() -> None:
    beat = RunEvent.heartbeat("r", 7, 2.0)
    assert beat.body is None
    assert beat.kind is EventKind.HEARTBEAT
    assert not beat.is_terminal
