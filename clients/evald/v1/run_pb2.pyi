import datetime

from evald.v1 import dataset_pb2 as _dataset_pb2
from evald.v1 import enums_pb2 as _enums_pb2
from evald.v1 import model_pb2 as _model_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RunSpec(_message.Message):
    __slots__ = ("name", "model_ids", "datasets", "max_concurrency", "repeat", "retry_policy", "generation_overrides", "labels", "dataset_options", "prompt", "choice_scoring", "budget", "judge", "response_cache", "prompt_format", "reducers")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODEL_IDS_FIELD_NUMBER: _ClassVar[int]
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    REPEAT_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    GENERATION_OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    DATASET_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CHOICE_SCORING_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_CACHE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    REDUCERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    model_ids: _containers.RepeatedScalarFieldContainer[str]
    datasets: _containers.RepeatedCompositeFieldContainer[_dataset_pb2.DatasetRef]
    max_concurrency: int
    repeat: int
    retry_policy: RetryPolicy
    generation_overrides: _model_pb2.GenerationParams
    labels: _containers.ScalarMap[str, str]
    dataset_options: _containers.RepeatedCompositeFieldContainer[DatasetRunOptions]
    prompt: _dataset_pb2.PromptOptions
    choice_scoring: _enums_pb2.ChoiceScoring
    budget: RunBudget
    judge: JudgeSpec
    response_cache: bool
    prompt_format: _enums_pb2.PromptFormat
    reducers: _containers.RepeatedCompositeFieldContainer[Reducer]
    def __init__(self, name: _Optional[str] = ..., model_ids: _Optional[_Iterable[str]] = ..., datasets: _Optional[_Iterable[_Union[_dataset_pb2.DatasetRef, _Mapping]]] = ..., max_concurrency: _Optional[int] = ..., repeat: _Optional[int] = ..., retry_policy: _Optional[_Union[RetryPolicy, _Mapping]] = ..., generation_overrides: _Optional[_Union[_model_pb2.GenerationParams, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., dataset_options: _Optional[_Iterable[_Union[DatasetRunOptions, _Mapping]]] = ..., prompt: _Optional[_Union[_dataset_pb2.PromptOptions, _Mapping]] = ..., choice_scoring: _Optional[_Union[_enums_pb2.ChoiceScoring, str]] = ..., budget: _Optional[_Union[RunBudget, _Mapping]] = ..., judge: _Optional[_Union[JudgeSpec, _Mapping]] = ..., response_cache: _Optional[bool] = ..., prompt_format: _Optional[_Union[_enums_pb2.PromptFormat, str]] = ..., reducers: _Optional[_Iterable[_Union[Reducer, _Mapping]]] = ...) -> None: ...

class RescoreSettings(_message.Message):
    __slots__ = ("reducers", "choice_scoring")
    REDUCERS_FIELD_NUMBER: _ClassVar[int]
    CHOICE_SCORING_FIELD_NUMBER: _ClassVar[int]
    reducers: _containers.RepeatedCompositeFieldContainer[Reducer]
    choice_scoring: _enums_pb2.ChoiceScoring
    def __init__(self, reducers: _Optional[_Iterable[_Union[Reducer, _Mapping]]] = ..., choice_scoring: _Optional[_Union[_enums_pb2.ChoiceScoring, str]] = ...) -> None: ...

class Reducer(_message.Message):
    __slots__ = ("kind", "k")
    KIND_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    kind: _enums_pb2.ReducerKind
    k: int
    def __init__(self, kind: _Optional[_Union[_enums_pb2.ReducerKind, str]] = ..., k: _Optional[int] = ...) -> None: ...

class RunBudget(_message.Message):
    __slots__ = ("max_cost_usd", "max_tokens")
    MAX_COST_USD_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    max_cost_usd: float
    max_tokens: int
    def __init__(self, max_cost_usd: _Optional[float] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class Cost(_message.Message):
    __slots__ = ("cost_usd", "estimated", "tokens", "priced")
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    PRICED_FIELD_NUMBER: _ClassVar[int]
    cost_usd: float
    estimated: bool
    tokens: int
    priced: bool
    def __init__(self, cost_usd: _Optional[float] = ..., estimated: _Optional[bool] = ..., tokens: _Optional[int] = ..., priced: _Optional[bool] = ...) -> None: ...

class JudgeSpec(_message.Message):
    __slots__ = ("model_id", "rubric", "score_format", "scale_min", "scale_max", "pass_threshold", "rounds", "parse_retries", "generation_overrides")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    RUBRIC_FIELD_NUMBER: _ClassVar[int]
    SCORE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SCALE_MIN_FIELD_NUMBER: _ClassVar[int]
    SCALE_MAX_FIELD_NUMBER: _ClassVar[int]
    PASS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    PARSE_RETRIES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    rubric: str
    score_format: _enums_pb2.JudgeScoreFormat
    scale_min: int
    scale_max: int
    pass_threshold: int
    rounds: int
    parse_retries: int
    generation_overrides: _model_pb2.GenerationParams
    def __init__(self, model_id: _Optional[str] = ..., rubric: _Optional[str] = ..., score_format: _Optional[_Union[_enums_pb2.JudgeScoreFormat, str]] = ..., scale_min: _Optional[int] = ..., scale_max: _Optional[int] = ..., pass_threshold: _Optional[int] = ..., rounds: _Optional[int] = ..., parse_retries: _Optional[int] = ..., generation_overrides: _Optional[_Union[_model_pb2.GenerationParams, _Mapping]] = ...) -> None: ...

class DatasetRunOptions(_message.Message):
    __slots__ = ("dataset", "generation_overrides", "prompt", "choice_scoring", "choice_continuation", "prompt_format")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    GENERATION_OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CHOICE_SCORING_FIELD_NUMBER: _ClassVar[int]
    CHOICE_CONTINUATION_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    dataset: _dataset_pb2.DatasetRef
    generation_overrides: _model_pb2.GenerationParams
    prompt: _dataset_pb2.PromptOptions
    choice_scoring: _enums_pb2.ChoiceScoring
    choice_continuation: _enums_pb2.ChoiceContinuation
    prompt_format: _enums_pb2.PromptFormat
    def __init__(self, dataset: _Optional[_Union[_dataset_pb2.DatasetRef, _Mapping]] = ..., generation_overrides: _Optional[_Union[_model_pb2.GenerationParams, _Mapping]] = ..., prompt: _Optional[_Union[_dataset_pb2.PromptOptions, _Mapping]] = ..., choice_scoring: _Optional[_Union[_enums_pb2.ChoiceScoring, str]] = ..., choice_continuation: _Optional[_Union[_enums_pb2.ChoiceContinuation, str]] = ..., prompt_format: _Optional[_Union[_enums_pb2.PromptFormat, str]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_retries", "backoff", "jitter_fraction", "retry_after_cap", "max_rate_limited_retries", "max_timeout_retries", "max_transient_retries")
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_FIELD_NUMBER: _ClassVar[int]
    JITTER_FRACTION_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_CAP_FIELD_NUMBER: _ClassVar[int]
    MAX_RATE_LIMITED_RETRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_TIMEOUT_RETRIES_FIELD_NUMBER: _ClassVar[int]
    MAX_TRANSIENT_RETRIES_FIELD_NUMBER: _ClassVar[int]
    max_retries: int
    backoff: _containers.RepeatedCompositeFieldContainer[_duration_pb2.Duration]
    jitter_fraction: float
    retry_after_cap: _duration_pb2.Duration
    max_rate_limited_retries: int
    max_timeout_retries: int
    max_transient_retries: int
    def __init__(self, max_retries: _Optional[int] = ..., backoff: _Optional[_Iterable[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]]] = ..., jitter_fraction: _Optional[float] = ..., retry_after_cap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_rate_limited_retries: _Optional[int] = ..., max_timeout_retries: _Optional[int] = ..., max_transient_retries: _Optional[int] = ...) -> None: ...

class RetryCounts(_message.Message):
    __slots__ = ("rate_limited", "timeout", "transient")
    RATE_LIMITED_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TRANSIENT_FIELD_NUMBER: _ClassVar[int]
    rate_limited: int
    timeout: int
    transient: int
    def __init__(self, rate_limited: _Optional[int] = ..., timeout: _Optional[int] = ..., transient: _Optional[int] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("run_id", "spec", "state", "progress", "created_time", "started_time", "finished_time", "last_seq", "request_id", "cancel_requested", "cancel_reason", "rescored_from_run_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    CREATED_TIME_FIELD_NUMBER: _ClassVar[int]
    STARTED_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISHED_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQ_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    RESCORED_FROM_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    spec: RunSpec
    state: _enums_pb2.RunState
    progress: RunProgress
    created_time: _timestamp_pb2.Timestamp
    started_time: _timestamp_pb2.Timestamp
    finished_time: _timestamp_pb2.Timestamp
    last_seq: int
    request_id: str
    cancel_requested: bool
    cancel_reason: str
    rescored_from_run_id: str
    def __init__(self, run_id: _Optional[str] = ..., spec: _Optional[_Union[RunSpec, _Mapping]] = ..., state: _Optional[_Union[_enums_pb2.RunState, str]] = ..., progress: _Optional[_Union[RunProgress, _Mapping]] = ..., created_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_seq: _Optional[int] = ..., request_id: _Optional[str] = ..., cancel_requested: _Optional[bool] = ..., cancel_reason: _Optional[str] = ..., rescored_from_run_id: _Optional[str] = ...) -> None: ...

class SubtaskCounts(_message.Message):
    __slots__ = ("total", "pending", "running", "retrying", "succeeded", "failed_permanent", "cancelled", "queued")
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    RETRYING_FIELD_NUMBER: _ClassVar[int]
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    FAILED_PERMANENT_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    total: int
    pending: int
    running: int
    retrying: int
    succeeded: int
    failed_permanent: int
    cancelled: int
    queued: int
    def __init__(self, total: _Optional[int] = ..., pending: _Optional[int] = ..., running: _Optional[int] = ..., retrying: _Optional[int] = ..., succeeded: _Optional[int] = ..., failed_permanent: _Optional[int] = ..., cancelled: _Optional[int] = ..., queued: _Optional[int] = ...) -> None: ...

class RunProgress(_message.Message):
    __slots__ = ("counts", "tasks", "cost")
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    counts: SubtaskCounts
    tasks: _containers.RepeatedCompositeFieldContainer[TaskProgress]
    cost: Cost
    def __init__(self, counts: _Optional[_Union[SubtaskCounts, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[TaskProgress, _Mapping]]] = ..., cost: _Optional[_Union[Cost, _Mapping]] = ...) -> None: ...

class TaskProgress(_message.Message):
    __slots__ = ("task_id", "model_id", "dataset", "task_type", "state", "counts", "result_status")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_STATUS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    model_id: str
    dataset: _dataset_pb2.DatasetRef
    task_type: _enums_pb2.TaskType
    state: _enums_pb2.TaskState
    counts: SubtaskCounts
    result_status: _enums_pb2.ResultStatus
    def __init__(self, task_id: _Optional[str] = ..., model_id: _Optional[str] = ..., dataset: _Optional[_Union[_dataset_pb2.DatasetRef, _Mapping]] = ..., task_type: _Optional[_Union[_enums_pb2.TaskType, str]] = ..., state: _Optional[_Union[_enums_pb2.TaskState, str]] = ..., counts: _Optional[_Union[SubtaskCounts, _Mapping]] = ..., result_status: _Optional[_Union[_enums_pb2.ResultStatus, str]] = ...) -> None: ...
