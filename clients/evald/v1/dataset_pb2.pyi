import datetime

from evald.v1 import enums_pb2 as _enums_pb2
from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Dataset(_message.Message):
    __slots__ = ("dataset_id", "name", "benchmark_version", "task_type", "record_count", "content_sha256", "prompt_template", "created_time", "size_bytes", "prompt")
    DATASET_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    RECORD_COUNT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SHA256_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_TIME_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    dataset_id: str
    name: str
    benchmark_version: str
    task_type: _enums_pb2.TaskType
    record_count: int
    content_sha256: str
    prompt_template: str
    created_time: _timestamp_pb2.Timestamp
    size_bytes: int
    prompt: PromptOptions
    def __init__(self, dataset_id: _Optional[str] = ..., name: _Optional[str] = ..., benchmark_version: _Optional[str] = ..., task_type: _Optional[_Union[_enums_pb2.TaskType, str]] = ..., record_count: _Optional[int] = ..., content_sha256: _Optional[str] = ..., prompt_template: _Optional[str] = ..., created_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., size_bytes: _Optional[int] = ..., prompt: _Optional[_Union[PromptOptions, _Mapping]] = ...) -> None: ...

class DatasetRef(_message.Message):
    __slots__ = ("name", "benchmark_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    benchmark_version: str
    def __init__(self, name: _Optional[str] = ..., benchmark_version: _Optional[str] = ...) -> None: ...

class UploadDatasetHeader(_message.Message):
    __slots__ = ("name", "benchmark_version", "task_type", "prompt_template", "request_id", "content_length", "prompt")
    NAME_FIELD_NUMBER: _ClassVar[int]
    BENCHMARK_VERSION_FIELD_NUMBER: _ClassVar[int]
    TASK_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    name: str
    benchmark_version: str
    task_type: _enums_pb2.TaskType
    prompt_template: str
    request_id: str
    content_length: int
    prompt: PromptOptions
    def __init__(self, name: _Optional[str] = ..., benchmark_version: _Optional[str] = ..., task_type: _Optional[_Union[_enums_pb2.TaskType, str]] = ..., prompt_template: _Optional[str] = ..., request_id: _Optional[str] = ..., content_length: _Optional[int] = ..., prompt: _Optional[_Union[PromptOptions, _Mapping]] = ...) -> None: ...

class PromptOptions(_message.Message):
    __slots__ = ("system_message", "shots", "shots_from", "shot_seed", "shot_format")
    SYSTEM_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SHOTS_FIELD_NUMBER: _ClassVar[int]
    SHOTS_FROM_FIELD_NUMBER: _ClassVar[int]
    SHOT_SEED_FIELD_NUMBER: _ClassVar[int]
    SHOT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    system_message: str
    shots: int
    shots_from: DatasetRef
    shot_seed: int
    shot_format: _enums_pb2.ShotFormat
    def __init__(self, system_message: _Optional[str] = ..., shots: _Optional[int] = ..., shots_from: _Optional[_Union[DatasetRef, _Mapping]] = ..., shot_seed: _Optional[int] = ..., shot_format: _Optional[_Union[_enums_pb2.ShotFormat, str]] = ...) -> None: ...
