import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GenerationParams(_message.Message):
    __slots__ = ("temperature", "max_tokens", "top_p", "seed", "stop")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    max_tokens: int
    top_p: float
    seed: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, temperature: _Optional[float] = ..., max_tokens: _Optional[int] = ..., top_p: _Optional[float] = ..., seed: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("model_id", "provider", "provider_model", "max_concurrency", "timeout", "default_params", "streaming")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PARAMS_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    provider: str
    provider_model: str
    max_concurrency: int
    timeout: _duration_pb2.Duration
    default_params: GenerationParams
    streaming: bool
    def __init__(self, model_id: _Optional[str] = ..., provider: _Optional[str] = ..., provider_model: _Optional[str] = ..., max_concurrency: _Optional[int] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., default_params: _Optional[_Union[GenerationParams, _Mapping]] = ..., streaming: _Optional[bool] = ...) -> None: ...

class ModelIdentity(_message.Message):
    __slots__ = ("model_id", "provider", "provider_model", "params")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_MODEL_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    provider: str
    provider_model: str
    params: GenerationParams
    def __init__(self, model_id: _Optional[str] = ..., provider: _Optional[str] = ..., provider_model: _Optional[str] = ..., params: _Optional[_Union[GenerationParams, _Mapping]] = ...) -> None: ...
