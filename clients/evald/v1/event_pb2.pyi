import datetime

from evald.v1 import enums_pb2 as _enums_pb2
from evald.v1 import errors_pb2 as _errors_pb2
from evald.v1 import result_pb2 as _result_pb2
from evald.v1 import run_pb2 as _run_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunEvent(_message.Message):
    __slots__ = ("seq", "event_time", "run_id", "state_changed", "progress", "task_scored", "sample_failed", "heartbeat")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TASK_SCORED_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_FAILED_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    seq: int
    event_time: _timestamp_pb2.Timestamp
    run_id: str
    state_changed: RunStateChanged
    progress: ProgressSnapshot
    task_scored: TaskScored
    sample_failed: SampleFailed
    heartbeat: Heartbeat
    def __init__(self, seq: _Optional[int] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., run_id: _Optional[str] = ..., state_changed: _Optional[_Union[RunStateChanged, _Mapping]] = ..., progress: _Optional[_Union[ProgressSnapshot, _Mapping]] = ..., task_scored: _Optional[_Union[TaskScored, _Mapping]] = ..., sample_failed: _Optional[_Union[SampleFailed, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class RunStateChanged(_message.Message):
    __slots__ = ("state", "previous", "cancel_requested", "cancel_reason")
    STATE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    state: _enums_pb2.RunState
    previous: _enums_pb2.RunState
    cancel_requested: bool
    cancel_reason: str
    def __init__(self, state: _Optional[_Union[_enums_pb2.RunState, str]] = ..., previous: _Optional[_Union[_enums_pb2.RunState, str]] = ..., cancel_requested: _Optional[bool] = ..., cancel_reason: _Optional[str] = ...) -> None: ...

class ProgressSnapshot(_message.Message):
    __slots__ = ("progress", "throughput_per_s", "eta", "completed_since_last", "throughput_known", "models")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    THROUGHPUT_PER_S_FIELD_NUMBER: _ClassVar[int]
    ETA_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_SINCE_LAST_FIELD_NUMBER: _ClassVar[int]
    THROUGHPUT_KNOWN_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    progress: _run_pb2.RunProgress
    throughput_per_s: float
    eta: _duration_pb2.Duration
    completed_since_last: int
    throughput_known: bool
    models: _containers.RepeatedCompositeFieldContainer[ModelActivity]
    def __init__(self, progress: _Optional[_Union[_run_pb2.RunProgress, _Mapping]] = ..., throughput_per_s: _Optional[float] = ..., eta: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., completed_since_last: _Optional[int] = ..., throughput_known: _Optional[bool] = ..., models: _Optional[_Iterable[_Union[ModelActivity, _Mapping]]] = ...) -> None: ...

class ModelActivity(_message.Message):
    __slots__ = ("model_id", "queued", "in_flight", "waiting_on", "stalled_since", "last_error", "last_error_time", "consecutive_failures", "concurrency_limit", "concurrency_min", "concurrency_max", "adaptive", "rate_limit_episodes", "replicas", "replicas_concurrency_limit", "replicas_rate_limit_episodes")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    WAITING_ON_FIELD_NUMBER: _ClassVar[int]
    STALLED_SINCE_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_TIME_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_FAILURES_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_MIN_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_MAX_FIELD_NUMBER: _ClassVar[int]
    ADAPTIVE_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_EPISODES_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_CONCURRENCY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_RATE_LIMIT_EPISODES_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    queued: int
    in_flight: int
    waiting_on: _containers.RepeatedScalarFieldContainer[str]
    stalled_since: _timestamp_pb2.Timestamp
    last_error: _errors_pb2.EvalError
    last_error_time: _timestamp_pb2.Timestamp
    consecutive_failures: int
    concurrency_limit: int
    concurrency_min: int
    concurrency_max: int
    adaptive: bool
    rate_limit_episodes: int
    replicas: int
    replicas_concurrency_limit: int
    replicas_rate_limit_episodes: int
    def __init__(self, model_id: _Optional[str] = ..., queued: _Optional[int] = ..., in_flight: _Optional[int] = ..., waiting_on: _Optional[_Iterable[str]] = ..., stalled_since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_error: _Optional[_Union[_errors_pb2.EvalError, _Mapping]] = ..., last_error_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., consecutive_failures: _Optional[int] = ..., concurrency_limit: _Optional[int] = ..., concurrency_min: _Optional[int] = ..., concurrency_max: _Optional[int] = ..., adaptive: _Optional[bool] = ..., rate_limit_episodes: _Optional[int] = ..., replicas: _Optional[int] = ..., replicas_concurrency_limit: _Optional[int] = ..., replicas_rate_limit_episodes: _Optional[int] = ...) -> None: ...

class TaskScored(_message.Message):
    __slots__ = ("result",)
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: _result_pb2.TaskEvaluationResult
    def __init__(self, result: _Optional[_Union[_result_pb2.TaskEvaluationResult, _Mapping]] = ...) -> None: ...

class SampleFailed(_message.Message):
    __slots__ = ("task_id", "subtask_id", "record_id", "repeat_index", "error", "attempts", "model_id", "failed_attempts")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SUBTASK_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    REPEAT_INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    FAILED_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    subtask_id: str
    record_id: str
    repeat_index: int
    error: _errors_pb2.EvalError
    attempts: int
    model_id: str
    failed_attempts: _run_pb2.RetryCounts
    def __init__(self, task_id: _Optional[str] = ..., subtask_id: _Optional[str] = ..., record_id: _Optional[str] = ..., repeat_index: _Optional[int] = ..., error: _Optional[_Union[_errors_pb2.EvalError, _Mapping]] = ..., attempts: _Optional[int] = ..., model_id: _Optional[str] = ..., failed_attempts: _Optional[_Union[_run_pb2.RetryCounts, _Mapping]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("current_seq",)
    CURRENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    current_seq: int
    def __init__(self, current_seq: _Optional[int] = ...) -> None: ...
