import datetime

from evald.v1 import enums_pb2 as _enums_pb2
from evald.v1 import errors_pb2 as _errors_pb2
from evald.v1 import model_pb2 as _model_pb2
from evald.v1 import payloads_pb2 as _payloads_pb2
from evald.v1 import run_pb2 as _run_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IntervalMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INTERVAL_METHOD_UNSPECIFIED: _ClassVar[IntervalMethod]
    INTERVAL_METHOD_BOOTSTRAP_PERCENTILE: _ClassVar[IntervalMethod]
    INTERVAL_METHOD_WILSON: _ClassVar[IntervalMethod]
    INTERVAL_METHOD_NORMAL: _ClassVar[IntervalMethod]
INTERVAL_METHOD_UNSPECIFIED: IntervalMethod
INTERVAL_METHOD_BOOTSTRAP_PERCENTILE: IntervalMethod
INTERVAL_METHOD_WILSON: IntervalMethod
INTERVAL_METHOD_NORMAL: IntervalMethod

class TaskEvaluationResult(_message.Message):
    __slots__ = ("task_id", "run_id", "task_type", "model", "benchmark", "metrics_summary", "metric_uncertainty", "execution_profile", "repeat_stats", "status", "errors", "provenance", "created_time", "judge_execution_profile", "reduced_metrics", "classification", "qa", "ner", "summarization", "generation", "multiple_choice", "code", "tool_call", "structured_output")
    class MetricsSummaryEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class MetricUncertaintyEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MetricUncertainty
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MetricUncertainty, _Mapping]] = ...) -> None: ...
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_FIELD_NUMBER: _ClassVar[int]
    METRICS_SUMMARY_FIELD_NUMBER: _ClassVar[int]
    METRIC_UNCERTAINTY_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_PROFILE_FIELD_NUMBER: _ClassVar[int]
    REPEAT_STATS_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    CREATED_TIME_FIELD_NUMBER: _ClassVar[int]
    JUDGE_EXECUTION_PROFILE_FIELD_NUMBER: _ClassVar[int]
    REDUCED_METRICS_FIELD_NUMBER: _ClassVar[int]
    CLASSIFICATION_FIELD_NUMBER: _ClassVar[int]
    QA_FIELD_NUMBER: _ClassVar[int]
    NER_FIELD_NUMBER: _ClassVar[int]
    SUMMARIZATION_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    MULTIPLE_CHOICE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    run_id: str
    task_type: _enums_pb2.TaskType
    model: _model_pb2.ModelIdentity
    benchmark: BenchmarkRef
    metrics_summary: _containers.ScalarMap[str, float]
    metric_uncertainty: _containers.MessageMap[str, MetricUncertainty]
    execution_profile: ExecutionProfile
    repeat_stats: RepeatStats
    status: _enums_pb2.ResultStatus
    errors: _containers.RepeatedCompositeFieldContainer[_errors_pb2.EvalError]
    provenance: Provenance
    created_time: _timestamp_pb2.Timestamp
    judge_execution_profile: ExecutionProfile
    reduced_metrics: _containers.RepeatedCompositeFieldContainer[ReducedMetric]
    classification: _payloads_pb2.ClassificationPayload
    qa: _payloads_pb2.QaPayload
    ner: _payloads_pb2.NerPayload
    summarization: _payloads_pb2.SummarizationPayload
    generation: _payloads_pb2.GenerationPayload
    multiple_choice: _payloads_pb2.MultipleChoicePayload
    code: _payloads_pb2.CodePayload
    tool_call: _payloads_pb2.ToolCallPayload
    structured_output: _payloads_pb2.StructuredOutputPayload
    def __init__(self, task_id: _Optional[str] = ..., run_id: _Optional[str] = ..., task_type: _Optional[_Union[_enums_pb2.TaskType, str]] = ..., model: _Optional[_Union[_model_pb2.ModelIdentity, _Mapping]] = ..., benchmark: _Optional[_Union[BenchmarkRef, _Mapping]] = ..., metrics_summary: _Optional[_Mapping[str, float]] = ..., metric_uncertainty: _Optional[_Mapping[str, MetricUncertainty]] = ..., execution_profile: _Optional[_Union[ExecutionProfile, _Mapping]] = ..., repeat_stats: _Optional[_Union[RepeatStats, _Mapping]] = ..., status: _Optional[_Union[_enums_pb2.ResultStatus, str]] = ..., errors: _Optional[_Iterable[_Union[_errors_pb2.EvalError, _Mapping]]] = ..., provenance: _Optional[_Union[Provenance, _Mapping]] = ..., created_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., judge_execution_profile: _Optional[_Union[ExecutionProfile, _Mapping]] = ..., reduced_metrics: _Optional[_Iterable[_Union[ReducedMetric, _Mapping]]] = ..., classification: _Optional[_Union[_payloads_pb2.ClassificationPayload, _Mapping]] = ..., qa: _Optional[_Union[_payloads_pb2.QaPayload, _Mapping]] = ..., ner: _Optional[_Union[_payloads_pb2.NerPayload, _Mapping]] = ..., summarization: _Optional[_Union[_payloads_pb2.SummarizationPayload, _Mapping]] = ..., generation: _Optional[_Union[_payloads_pb2.GenerationPayload, _Mapping]] = ..., multiple_choice: _Optional[_Union[_payloads_pb2.MultipleChoicePayload, _Mapping]] = ..., code: _Optional[_Union[_payloads_pb2.CodePayload, _Mapping]] = ..., tool_call: _Optional[_Union[_payloads_pb2.ToolCallPayload, _Mapping]] = ..., structured_output: _Optional[_Union[_payloads_pb2.StructuredOutputPayload, _Mapping]] = ...) -> None: ...

class ReducedMetric(_message.Message):
    __slots__ = ("name", "value", "interval", "records", "records_skipped")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: float
    interval: MetricInterval
    records: int
    records_skipped: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[float] = ..., interval: _Optional[_Union[MetricInterval, _Mapping]] = ..., records: _Optional[int] = ..., records_skipped: _Optional[int] = ...) -> None: ...

class BenchmarkRef(_message.Message):
    __slots__ = ("name", "benchmark_version", "content_sha256", "record_count", "dataset_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    DATASET_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    benchmark_version: str
    content_sha256: str
    record_count: int
    dataset_id: str
    def __init__(self, name: _Optional[str] = ..., benchmark_version: _Optional[str] = ..., content_sha256: _Optional[str] = ..., record_count: _Optional[int] = ..., dataset_id: _Optional[str] = ...) -> None: ...

class MetricUncertainty(_message.Message):
    __slots__ = ("bootstrap", "analytic")
    BOOTSTRAP_FIELD_NUMBER: _ClassVar[int]
    ANALYTIC_FIELD_NUMBER: _ClassVar[int]
    bootstrap: MetricInterval
    analytic: MetricInterval
    def __init__(self, bootstrap: _Optional[_Union[MetricInterval, _Mapping]] = ..., analytic: _Optional[_Union[MetricInterval, _Mapping]] = ...) -> None: ...

class MetricInterval(_message.Message):
    __slots__ = ("lower", "upper", "confidence_level", "method", "resamples", "seed")
    LOWER_FIELD_NUMBER: _ClassVar[int]
    UPPER_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    RESAMPLES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    lower: float
    upper: float
    confidence_level: float
    method: IntervalMethod
    resamples: int
    seed: int
    def __init__(self, lower: _Optional[float] = ..., upper: _Optional[float] = ..., confidence_level: _Optional[float] = ..., method: _Optional[_Union[IntervalMethod, str]] = ..., resamples: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class ExecutionProfile(_message.Message):
    __slots__ = ("samples_total", "samples_succeeded", "samples_failed", "samples_cancelled", "wall_time", "latency_mean_ms", "latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "ttft_p50_ms", "ttft_p99_ms", "prompt_tokens", "completion_tokens", "tokens_per_second", "requests", "retries", "rate_limited", "effective_concurrency", "scoring_time", "samples_truncated", "samples_empty", "samples_without_usage", "decode_tokens_per_second", "cost", "cache_hits")
    SAMPLES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FAILED_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    WALL_TIME_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MEAN_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P90_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P50_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_P99_MS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMITED_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    SCORING_TIME_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_EMPTY_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_WITHOUT_USAGE_FIELD_NUMBER: _ClassVar[int]
    DECODE_TOKENS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    CACHE_HITS_FIELD_NUMBER: _ClassVar[int]
    samples_total: int
    samples_succeeded: int
    samples_failed: int
    samples_cancelled: int
    wall_time: _duration_pb2.Duration
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p90_ms: float
    latency_p99_ms: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    prompt_tokens: int
    completion_tokens: int
    tokens_per_second: float
    requests: int
    retries: int
    rate_limited: int
    effective_concurrency: float
    scoring_time: _duration_pb2.Duration
    samples_truncated: int
    samples_empty: int
    samples_without_usage: int
    decode_tokens_per_second: float
    cost: _run_pb2.Cost
    cache_hits: int
    def __init__(self, samples_total: _Optional[int] = ..., samples_succeeded: _Optional[int] = ..., samples_failed: _Optional[int] = ..., samples_cancelled: _Optional[int] = ..., wall_time: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., latency_mean_ms: _Optional[float] = ..., latency_p50_ms: _Optional[float] = ..., latency_p90_ms: _Optional[float] = ..., latency_p99_ms: _Optional[float] = ..., ttft_p50_ms: _Optional[float] = ..., ttft_p99_ms: _Optional[float] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., tokens_per_second: _Optional[float] = ..., requests: _Optional[int] = ..., retries: _Optional[int] = ..., rate_limited: _Optional[int] = ..., effective_concurrency: _Optional[float] = ..., scoring_time: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., samples_truncated: _Optional[int] = ..., samples_empty: _Optional[int] = ..., samples_without_usage: _Optional[int] = ..., decode_tokens_per_second: _Optional[float] = ..., cost: _Optional[_Union[_run_pb2.Cost, _Mapping]] = ..., cache_hits: _Optional[int] = ...) -> None: ...

class RepeatStats(_message.Message):
    __slots__ = ("repeats", "records", "mean_within_record_stddev", "consistent_record_fraction")
    REPEATS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    MEAN_WITHIN_RECORD_STDDEV_FIELD_NUMBER: _ClassVar[int]
    CONSISTENT_RECORD_FRACTION_FIELD_NUMBER: _ClassVar[int]
    repeats: int
    records: int
    mean_within_record_stddev: float
    consistent_record_fraction: float
    def __init__(self, repeats: _Optional[int] = ..., records: _Optional[int] = ..., mean_within_record_stddev: _Optional[float] = ..., consistent_record_fraction: _Optional[float] = ...) -> None: ...

class Provenance(_message.Message):
    __slots__ = ("contract_version", "evald_version", "scorer", "prompt_template_sha256", "dataset_sha256", "python_version", "platform", "bootstrap_seed", "dependencies", "judge", "prompt_format", "rescored_from_run_id")
    class DependenciesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONTRACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    EVALD_VERSION_FIELD_NUMBER: _ClassVar[int]
    SCORER_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEMPLATE_SHA256_FIELD_NUMBER: _ClassVar[int]
    DATASET_SHA256_FIELD_NUMBER: _ClassVar[int]
    PYTHON_VERSION_FIELD_NUMBER: _ClassVar[int]
    PLATFORM_FIELD_NUMBER: _ClassVar[int]
    BOOTSTRAP_SEED_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    RESCORED_FROM_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    contract_version: str
    evald_version: str
    scorer: str
    prompt_template_sha256: str
    dataset_sha256: str
    python_version: str
    platform: str
    bootstrap_seed: int
    dependencies: _containers.ScalarMap[str, str]
    judge: JudgeProvenance
    prompt_format: _enums_pb2.PromptFormat
    rescored_from_run_id: str
    def __init__(self, contract_version: _Optional[str] = ..., evald_version: _Optional[str] = ..., scorer: _Optional[str] = ..., prompt_template_sha256: _Optional[str] = ..., dataset_sha256: _Optional[str] = ..., python_version: _Optional[str] = ..., platform: _Optional[str] = ..., bootstrap_seed: _Optional[int] = ..., dependencies: _Optional[_Mapping[str, str]] = ..., judge: _Optional[_Union[JudgeProvenance, _Mapping]] = ..., prompt_format: _Optional[_Union[_enums_pb2.PromptFormat, str]] = ..., rescored_from_run_id: _Optional[str] = ...) -> None: ...

class JudgeProvenance(_message.Message):
    __slots__ = ("model", "rubric_sha256", "score_format", "scale_min", "scale_max", "pass_threshold", "rounds", "parse_retries", "judged_samples", "unjudged_samples")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    RUBRIC_SHA256_FIELD_NUMBER: _ClassVar[int]
    SCORE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SCALE_MIN_FIELD_NUMBER: _ClassVar[int]
    SCALE_MAX_FIELD_NUMBER: _ClassVar[int]
    PASS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    PARSE_RETRIES_FIELD_NUMBER: _ClassVar[int]
    JUDGED_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    UNJUDGED_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    model: _model_pb2.ModelIdentity
    rubric_sha256: str
    score_format: _enums_pb2.JudgeScoreFormat
    scale_min: int
    scale_max: int
    pass_threshold: float
    rounds: int
    parse_retries: int
    judged_samples: int
    unjudged_samples: int
    def __init__(self, model: _Optional[_Union[_model_pb2.ModelIdentity, _Mapping]] = ..., rubric_sha256: _Optional[str] = ..., score_format: _Optional[_Union[_enums_pb2.JudgeScoreFormat, str]] = ..., scale_min: _Optional[int] = ..., scale_max: _Optional[int] = ..., pass_threshold: _Optional[float] = ..., rounds: _Optional[int] = ..., parse_retries: _Optional[int] = ..., judged_samples: _Optional[int] = ..., unjudged_samples: _Optional[int] = ...) -> None: ...
