from evald.v1 import enums_pb2 as _enums_pb2
from evald.v1 import result_pb2 as _result_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskPairing(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_PAIRING_UNSPECIFIED: _ClassVar[TaskPairing]
    TASK_PAIRING_MODEL_ID: _ClassVar[TaskPairing]
    TASK_PAIRING_MODEL_POSITION: _ClassVar[TaskPairing]
    TASK_PAIRING_EXPLICIT: _ClassVar[TaskPairing]

class PairedTest(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PAIRED_TEST_UNSPECIFIED: _ClassVar[PairedTest]
    PAIRED_TEST_MCNEMAR_EXACT: _ClassVar[PairedTest]
    PAIRED_TEST_PERMUTATION: _ClassVar[PairedTest]
TASK_PAIRING_UNSPECIFIED: TaskPairing
TASK_PAIRING_MODEL_ID: TaskPairing
TASK_PAIRING_MODEL_POSITION: TaskPairing
TASK_PAIRING_EXPLICIT: TaskPairing
PAIRED_TEST_UNSPECIFIED: PairedTest
PAIRED_TEST_MCNEMAR_EXACT: PairedTest
PAIRED_TEST_PERMUTATION: PairedTest

class RunComparison(_message.Message):
    __slots__ = ("baseline_run_id", "candidate_run_id", "task_pairing", "tasks", "unmatched_tasks", "confidence_level", "resamples", "permutations", "seed")
    BASELINE_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_PAIRING_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    UNMATCHED_TASKS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    RESAMPLES_FIELD_NUMBER: _ClassVar[int]
    PERMUTATIONS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    baseline_run_id: str
    candidate_run_id: str
    task_pairing: TaskPairing
    tasks: _containers.RepeatedCompositeFieldContainer[TaskComparison]
    unmatched_tasks: _containers.RepeatedCompositeFieldContainer[UnmatchedTask]
    confidence_level: float
    resamples: int
    permutations: int
    seed: int
    def __init__(self, baseline_run_id: _Optional[str] = ..., candidate_run_id: _Optional[str] = ..., task_pairing: _Optional[_Union[TaskPairing, str]] = ..., tasks: _Optional[_Iterable[_Union[TaskComparison, _Mapping]]] = ..., unmatched_tasks: _Optional[_Iterable[_Union[UnmatchedTask, _Mapping]]] = ..., confidence_level: _Optional[float] = ..., resamples: _Optional[int] = ..., permutations: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class ModelPair(_message.Message):
    __slots__ = ("baseline_model_id", "candidate_model_id")
    BASELINE_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    baseline_model_id: str
    candidate_model_id: str
    def __init__(self, baseline_model_id: _Optional[str] = ..., candidate_model_id: _Optional[str] = ...) -> None: ...

class TaskComparison(_message.Message):
    __slots__ = ("baseline_task_id", "candidate_task_id", "baseline_model_id", "candidate_model_id", "dataset_name", "benchmark_version", "task_type", "paired_samples", "paired_records", "baseline_only_records", "candidate_only_records", "baseline_only_record_ids", "candidate_only_record_ids", "metrics")
    BASELINE_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    BASELINE_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_NAME_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    PAIRED_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    PAIRED_RECORDS_FIELD_NUMBER: _ClassVar[int]
    BASELINE_ONLY_RECORDS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ONLY_RECORDS_FIELD_NUMBER: _ClassVar[int]
    BASELINE_ONLY_RECORD_IDS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ONLY_RECORD_IDS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    baseline_task_id: str
    candidate_task_id: str
    baseline_model_id: str
    candidate_model_id: str
    dataset_name: str
    benchmark_version: str
    task_type: _enums_pb2.TaskType
    paired_samples: int
    paired_records: int
    baseline_only_records: int
    candidate_only_records: int
    baseline_only_record_ids: _containers.RepeatedScalarFieldContainer[str]
    candidate_only_record_ids: _containers.RepeatedScalarFieldContainer[str]
    metrics: _containers.RepeatedCompositeFieldContainer[MetricComparison]
    def __init__(self, baseline_task_id: _Optional[str] = ..., candidate_task_id: _Optional[str] = ..., baseline_model_id: _Optional[str] = ..., candidate_model_id: _Optional[str] = ..., dataset_name: _Optional[str] = ..., benchmark_version: _Optional[str] = ..., task_type: _Optional[_Union[_enums_pb2.TaskType, str]] = ..., paired_samples: _Optional[int] = ..., paired_records: _Optional[int] = ..., baseline_only_records: _Optional[int] = ..., candidate_only_records: _Optional[int] = ..., baseline_only_record_ids: _Optional[_Iterable[str]] = ..., candidate_only_record_ids: _Optional[_Iterable[str]] = ..., metrics: _Optional[_Iterable[_Union[MetricComparison, _Mapping]]] = ...) -> None: ...

class MetricComparison(_message.Message):
    __slots__ = ("metric", "baseline_value", "candidate_value", "delta", "delta_interval", "p_value", "test", "records_improved", "records_worsened", "records_unchanged", "record_score")
    METRIC_FIELD_NUMBER: _ClassVar[int]
    BASELINE_VALUE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_VALUE_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    DELTA_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    P_VALUE_FIELD_NUMBER: _ClassVar[int]
    TEST_FIELD_NUMBER: _ClassVar[int]
    RECORDS_IMPROVED_FIELD_NUMBER: _ClassVar[int]
    RECORDS_WORSENED_FIELD_NUMBER: _ClassVar[int]
    RECORDS_UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    RECORD_SCORE_FIELD_NUMBER: _ClassVar[int]
    metric: str
    baseline_value: float
    candidate_value: float
    delta: float
    delta_interval: _result_pb2.MetricInterval
    p_value: float
    test: PairedTest
    records_improved: int
    records_worsened: int
    records_unchanged: int
    record_score: str
    def __init__(self, metric: _Optional[str] = ..., baseline_value: _Optional[float] = ..., candidate_value: _Optional[float] = ..., delta: _Optional[float] = ..., delta_interval: _Optional[_Union[_result_pb2.MetricInterval, _Mapping]] = ..., p_value: _Optional[float] = ..., test: _Optional[_Union[PairedTest, str]] = ..., records_improved: _Optional[int] = ..., records_worsened: _Optional[int] = ..., records_unchanged: _Optional[int] = ..., record_score: _Optional[str] = ...) -> None: ...

class UnmatchedTask(_message.Message):
    __slots__ = ("run_id", "task_id", "model_id", "dataset_name", "benchmark_version")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    DATASET_NAME_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task_id: str
    model_id: str
    dataset_name: str
    benchmark_version: str
    def __init__(self, run_id: _Optional[str] = ..., task_id: _Optional[str] = ..., model_id: _Optional[str] = ..., dataset_name: _Optional[str] = ..., benchmark_version: _Optional[str] = ...) -> None: ...
