from evald.v1 import comparison_pb2 as _comparison_pb2
from evald.v1 import dataset_pb2 as _dataset_pb2
from evald.v1 import enums_pb2 as _enums_pb2
from evald.v1 import errors_pb2 as _errors_pb2
from evald.v1 import event_pb2 as _event_pb2
from evald.v1 import model_pb2 as _model_pb2
from evald.v1 import result_pb2 as _result_pb2
from evald.v1 import run_pb2 as _run_pb2
from evald.v1 import sample_pb2 as _sample_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[_model_pb2.Model]
    def __init__(self, models: _Optional[_Iterable[_Union[_model_pb2.Model, _Mapping]]] = ...) -> None: ...

class UploadDatasetRequest(_message.Message):
    __slots__ = ("header", "chunk")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    header: _dataset_pb2.UploadDatasetHeader
    chunk: bytes
    def __init__(self, header: _Optional[_Union[_dataset_pb2.UploadDatasetHeader, _Mapping]] = ..., chunk: _Optional[bytes] = ...) -> None: ...

class UploadDatasetResponse(_message.Message):
    __slots__ = ("dataset", "created")
    DATASET_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    dataset: _dataset_pb2.Dataset
    created: bool
    def __init__(self, dataset: _Optional[_Union[_dataset_pb2.Dataset, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class GetDatasetRequest(_message.Message):
    __slots__ = ("dataset_id", "ref")
    DATASET_ID_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    dataset_id: str
    ref: _dataset_pb2.DatasetRef
    def __init__(self, dataset_id: _Optional[str] = ..., ref: _Optional[_Union[_dataset_pb2.DatasetRef, _Mapping]] = ...) -> None: ...

class GetDatasetResponse(_message.Message):
    __slots__ = ("dataset",)
    DATASET_FIELD_NUMBER: _ClassVar[int]
    dataset: _dataset_pb2.Dataset
    def __init__(self, dataset: _Optional[_Union[_dataset_pb2.Dataset, _Mapping]] = ...) -> None: ...

class ListDatasetsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "name", "task_type")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    name: str
    task_type: _enums_pb2.TaskType
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., name: _Optional[str] = ..., task_type: _Optional[_Union[_enums_pb2.TaskType, str]] = ...) -> None: ...

class ListDatasetsResponse(_message.Message):
    __slots__ = ("datasets", "next_page_token")
    DATASETS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    datasets: _containers.RepeatedCompositeFieldContainer[_dataset_pb2.Dataset]
    next_page_token: str
    def __init__(self, datasets: _Optional[_Iterable[_Union[_dataset_pb2.Dataset, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CreateRunRequest(_message.Message):
    __slots__ = ("spec", "request_id")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    spec: _run_pb2.RunSpec
    request_id: str
    def __init__(self, spec: _Optional[_Union[_run_pb2.RunSpec, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class GetRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "states")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    states: _containers.RepeatedScalarFieldContainer[_enums_pb2.RunState]
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., states: _Optional[_Iterable[_Union[_enums_pb2.RunState, str]]] = ...) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_run_pb2.Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[_run_pb2.Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class CancelRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ...) -> None: ...

class RetryRunRequest(_message.Message):
    __slots__ = ("run_id", "task_ids", "categories", "reasons", "states")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task_ids: _containers.RepeatedScalarFieldContainer[str]
    categories: _containers.RepeatedScalarFieldContainer[_errors_pb2.ErrorCategory]
    reasons: _containers.RepeatedScalarFieldContainer[_errors_pb2.ErrorReason]
    states: _containers.RepeatedScalarFieldContainer[_enums_pb2.SubtaskState]
    def __init__(self, run_id: _Optional[str] = ..., task_ids: _Optional[_Iterable[str]] = ..., categories: _Optional[_Iterable[_Union[_errors_pb2.ErrorCategory, str]]] = ..., reasons: _Optional[_Iterable[_Union[_errors_pb2.ErrorReason, str]]] = ..., states: _Optional[_Iterable[_Union[_enums_pb2.SubtaskState, str]]] = ...) -> None: ...

class RetryRunResponse(_message.Message):
    __slots__ = ("run", "requeued")
    RUN_FIELD_NUMBER: _ClassVar[int]
    REQUEUED_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    requeued: int
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ..., requeued: _Optional[int] = ...) -> None: ...

class WatchRunRequest(_message.Message):
    __slots__ = ("run_id", "after_seq")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    after_seq: int
    def __init__(self, run_id: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class WatchRunResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _event_pb2.RunEvent
    def __init__(self, event: _Optional[_Union[_event_pb2.RunEvent, _Mapping]] = ...) -> None: ...

class ListResultsRequest(_message.Message):
    __slots__ = ("run_id", "page_size", "page_token", "task_ids")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TASK_IDS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    page_size: int
    page_token: str
    task_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, run_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., task_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ListResultsResponse(_message.Message):
    __slots__ = ("results", "next_page_token")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_result_pb2.TaskEvaluationResult]
    next_page_token: str
    def __init__(self, results: _Optional[_Iterable[_Union[_result_pb2.TaskEvaluationResult, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSamplesRequest(_message.Message):
    __slots__ = ("run_id", "task_id", "states", "page_size", "page_token")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task_id: str
    states: _containers.RepeatedScalarFieldContainer[_enums_pb2.SubtaskState]
    page_size: int
    page_token: str
    def __init__(self, run_id: _Optional[str] = ..., task_id: _Optional[str] = ..., states: _Optional[_Iterable[_Union[_enums_pb2.SubtaskState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSamplesResponse(_message.Message):
    __slots__ = ("samples", "next_page_token")
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    samples: _containers.RepeatedCompositeFieldContainer[_sample_pb2.Sample]
    next_page_token: str
    def __init__(self, samples: _Optional[_Iterable[_Union[_sample_pb2.Sample, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class CompareRunsRequest(_message.Message):
    __slots__ = ("baseline_run_id", "candidate_run_id", "model_pairs", "resamples", "permutations", "seed")
    BASELINE_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_RUN_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_PAIRS_FIELD_NUMBER: _ClassVar[int]
    RESAMPLES_FIELD_NUMBER: _ClassVar[int]
    PERMUTATIONS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    baseline_run_id: str
    candidate_run_id: str
    model_pairs: _containers.RepeatedCompositeFieldContainer[_comparison_pb2.ModelPair]
    resamples: int
    permutations: int
    seed: int
    def __init__(self, baseline_run_id: _Optional[str] = ..., candidate_run_id: _Optional[str] = ..., model_pairs: _Optional[_Iterable[_Union[_comparison_pb2.ModelPair, _Mapping]]] = ..., resamples: _Optional[int] = ..., permutations: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class RescoreRunRequest(_message.Message):
    __slots__ = ("run_id", "settings", "name", "request_id")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    settings: _run_pb2.RescoreSettings
    name: str
    request_id: str
    def __init__(self, run_id: _Optional[str] = ..., settings: _Optional[_Union[_run_pb2.RescoreSettings, _Mapping]] = ..., name: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class RescoreRunResponse(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _run_pb2.Run
    def __init__(self, run: _Optional[_Union[_run_pb2.Run, _Mapping]] = ...) -> None: ...

class CompareRunsResponse(_message.Message):
    __slots__ = ("comparison",)
    COMPARISON_FIELD_NUMBER: _ClassVar[int]
    comparison: _comparison_pb2.RunComparison
    def __init__(self, comparison: _Optional[_Union[_comparison_pb2.RunComparison, _Mapping]] = ...) -> None: ...
