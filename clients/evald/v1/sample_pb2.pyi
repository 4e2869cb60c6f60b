import datetime

from evald.v1 import enums_pb2 as _enums_pb2
from evald.v1 import errors_pb2 as _errors_pb2
from evald.v1 import run_pb2 as _run_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_CONTENT_FILTER: _ClassVar[FinishReason]
    FINISH_REASON_TOOL_CALLS: _ClassVar[FinishReason]
    FINISH_REASON_UNKNOWN: _ClassVar[FinishReason]
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_CONTENT_FILTER: FinishReason
FINISH_REASON_TOOL_CALLS: FinishReason
FINISH_REASON_UNKNOWN: FinishReason

class Sample(_message.Message):
    __slots__ = ("subtask_id", "task_id", "model_id", "record_id", "repeat_index", "state", "input", "expected", "output", "scores", "flags", "attempts", "latency_ms", "ttft_ms", "prompt_tokens", "completion_tokens", "first_error", "last_error", "finished_time", "finish_reason", "usage_reported", "decode_tokens_per_second", "truncated_fields", "cost", "failed_attempts", "judgement", "cache_hit", "execution")
    class ScoresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    SUBTASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    REPEAT_INDEX_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FIRST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISHED_TIME_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_REPORTED_FIELD_NUMBER: _ClassVar[int]
    DECODE_TOKENS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    FAILED_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    JUDGEMENT_FIELD_NUMBER: _ClassVar[int]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_FIELD_NUMBER: _ClassVar[int]
    subtask_id: str
    task_id: str
    model_id: str
    record_id: str
    repeat_index: int
    state: _enums_pb2.SubtaskState
    input: str
    expected: str
    output: str
    scores: _containers.ScalarMap[str, float]
    flags: _containers.RepeatedScalarFieldContainer[str]
    attempts: int
    latency_ms: float
    ttft_ms: float
    prompt_tokens: int
    completion_tokens: int
    first_error: _errors_pb2.EvalError
    last_error: _errors_pb2.EvalError
    finished_time: _timestamp_pb2.Timestamp
    finish_reason: FinishReason
    usage_reported: bool
    decode_tokens_per_second: float
    truncated_fields: _containers.RepeatedCompositeFieldContainer[TruncatedField]
    cost: _run_pb2.Cost
    failed_attempts: _run_pb2.RetryCounts
    judgement: SampleJudgement
    cache_hit: bool
    execution: CodeExecution
    def __init__(self, subtask_id: _Optional[str] = ..., task_id: _Optional[str] = ..., model_id: _Optional[str] = ..., record_id: _Optional[str] = ..., repeat_index: _Optional[int] = ..., state: _Optional[_Union[_enums_pb2.SubtaskState, str]] = ..., input: _Optional[str] = ..., expected: _Optional[str] = ..., output: _Optional[str] = ..., scores: _Optional[_Mapping[str, float]] = ..., flags: _Optional[_Iterable[str]] = ..., attempts: _Optional[int] = ..., latency_ms: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., first_error: _Optional[_Union[_errors_pb2.EvalError, _Mapping]] = ..., last_error: _Optional[_Union[_errors_pb2.EvalError, _Mapping]] = ..., finished_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ..., usage_reported: _Optional[bool] = ..., decode_tokens_per_second: _Optional[float] = ..., truncated_fields: _Optional[_Iterable[_Union[TruncatedField, _Mapping]]] = ..., cost: _Optional[_Union[_run_pb2.Cost, _Mapping]] = ..., failed_attempts: _Optional[_Union[_run_pb2.RetryCounts, _Mapping]] = ..., judgement: _Optional[_Union[SampleJudgement, _Mapping]] = ..., cache_hit: _Optional[bool] = ..., execution: _Optional[_Union[CodeExecution, _Mapping]] = ...) -> None: ...

class CodeExecution(_message.Message):
    __slots__ = ("verdict", "reason", "error_type", "traceback", "resource", "tests", "extraction_rule", "duration_ms", "stdout", "stderr", "output_truncated")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    TRACEBACK_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TESTS_FIELD_NUMBER: _ClassVar[int]
    EXTRACTION_RULE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    STDOUT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    verdict: str
    reason: str
    error_type: str
    traceback: str
    resource: str
    tests: _containers.RepeatedCompositeFieldContainer[CodeTestOutcome]
    extraction_rule: str
    duration_ms: float
    stdout: str
    stderr: str
    output_truncated: bool
    def __init__(self, verdict: _Optional[str] = ..., reason: _Optional[str] = ..., error_type: _Optional[str] = ..., traceback: _Optional[str] = ..., resource: _Optional[str] = ..., tests: _Optional[_Iterable[_Union[CodeTestOutcome, _Mapping]]] = ..., extraction_rule: _Optional[str] = ..., duration_ms: _Optional[float] = ..., stdout: _Optional[str] = ..., stderr: _Optional[str] = ..., output_truncated: _Optional[bool] = ...) -> None: ...

class CodeTestOutcome(_message.Message):
    __slots__ = ("index", "status", "error_type", "detail")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    index: int
    status: str
    error_type: str
    detail: str
    def __init__(self, index: _Optional[int] = ..., status: _Optional[str] = ..., error_type: _Optional[str] = ..., detail: _Optional[str] = ...) -> None: ...

class TruncatedField(_message.Message):
    __slots__ = ("field", "full_bytes")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    FULL_BYTES_FIELD_NUMBER: _ClassVar[int]
    field: str
    full_bytes: int
    def __init__(self, field: _Optional[str] = ..., full_bytes: _Optional[int] = ...) -> None: ...

class SampleJudgement(_message.Message):
    __slots__ = ("score", "passed", "rationale", "rounds", "agreed", "error")
    SCORE_FIELD_NUMBER: _ClassVar[int]
    PASSED_FIELD_NUMBER: _ClassVar[int]
    RATIONALE_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    AGREED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    score: float
    passed: bool
    rationale: str
    rounds: int
    agreed: bool
    error: _errors_pb2.EvalError
    def __init__(self, score: _Optional[float] = ..., passed: _Optional[bool] = ..., rationale: _Optional[str] = ..., rounds: _Optional[int] = ..., agreed: _Optional[bool] = ..., error: _Optional[_Union[_errors_pb2.EvalError, _Mapping]] = ...) -> None: ...
