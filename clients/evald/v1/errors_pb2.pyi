from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCategory(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CATEGORY_UNSPECIFIED: _ClassVar[ErrorCategory]
    ERROR_CATEGORY_DATASET_INVALID: _ClassVar[ErrorCategory]
    ERROR_CATEGORY_MODEL_PROVIDER_ERROR: _ClassVar[ErrorCategory]
    ERROR_CATEGORY_EVAL_OPERATOR_ERROR: _ClassVar[ErrorCategory]
    ERROR_CATEGORY_REQUEST_INVALID: _ClassVar[ErrorCategory]

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_REASON_UNSPECIFIED: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_PARSE_ERROR: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_FIELD_MISSING: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_FIELD_INVALID: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_DUPLICATE_ID: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_EMPTY: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_TOO_LARGE: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_ENCODING_ERROR: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_HEADER_INVALID: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_VERSION_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_VERSION_CONFLICT: _ClassVar[ErrorReason]
    ERROR_REASON_PROVIDER_RATE_LIMITED: _ClassVar[ErrorReason]
    ERROR_REASON_PROVIDER_TIMEOUT: _ClassVar[ErrorReason]
    ERROR_REASON_PROVIDER_HTTP_5XX: _ClassVar[ErrorReason]
    ERROR_REASON_PROVIDER_CONNECTION_ERROR: _ClassVar[ErrorReason]
    ERROR_REASON_PROVIDER_BAD_RESPONSE: _ClassVar[ErrorReason]
    ERROR_REASON_PROVIDER_REJECTED: _ClassVar[ErrorReason]
    ERROR_REASON_PROVIDER_AUTH_FAILED: _ClassVar[ErrorReason]
    ERROR_REASON_SCORER_FAILED: _ClassVar[ErrorReason]
    ERROR_REASON_SCORER_TIMEOUT: _ClassVar[ErrorReason]
    ERROR_REASON_INTERNAL_ERROR: _ClassVar[ErrorReason]
    ERROR_REASON_INVALID_ARGUMENT: _ClassVar[ErrorReason]
    ERROR_REASON_RUN_SPEC_INVALID: _ClassVar[ErrorReason]
    ERROR_REASON_MODEL_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_RUN_NOT_FOUND: _ClassVar[ErrorReason]
    ERROR_REASON_REQUEST_ID_CONFLICT: _ClassVar[ErrorReason]
    ERROR_REASON_LIMIT_EXCEEDED: _ClassVar[ErrorReason]
    ERROR_REASON_RUN_NOT_RETRYABLE: _ClassVar[ErrorReason]
    ERROR_REASON_WATCH_SEQ_EXPIRED: _ClassVar[ErrorReason]
    ERROR_REASON_PAGE_TOKEN_INVALID: _ClassVar[ErrorReason]
    ERROR_REASON_UNAUTHENTICATED: _ClassVar[ErrorReason]
    ERROR_REASON_SERVER_DRAINING: _ClassVar[ErrorReason]
    ERROR_REASON_DATASET_UPLOAD_INCOMPLETE: _ClassVar[ErrorReason]
    ERROR_REASON_RUN_NOT_FINISHED: _ClassVar[ErrorReason]
    ERROR_REASON_JUDGE_VERDICT_UNPARSEABLE: _ClassVar[ErrorReason]
    ERROR_REASON_STORE_UNAVAILABLE: _ClassVar[ErrorReason]
    ERROR_REASON_SANDBOX_UNAVAILABLE: _ClassVar[ErrorReason]
ERROR_CATEGORY_UNSPECIFIED: ErrorCategory
ERROR_CATEGORY_DATASET_INVALID: ErrorCategory
ERROR_CATEGORY_MODEL_PROVIDER_ERROR: ErrorCategory
ERROR_CATEGORY_EVAL_OPERATOR_ERROR: ErrorCategory
ERROR_CATEGORY_REQUEST_INVALID: ErrorCategory
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_DATASET_PARSE_ERROR: ErrorReason
ERROR_REASON_DATASET_FIELD_MISSING: ErrorReason
ERROR_REASON_DATASET_FIELD_INVALID: ErrorReason
ERROR_REASON_DATASET_DUPLICATE_ID: ErrorReason
ERROR_REASON_DATASET_EMPTY: ErrorReason
ERROR_REASON_DATASET_TOO_LARGE: ErrorReason
ERROR_REASON_DATASET_ENCODING_ERROR: ErrorReason
ERROR_REASON_DATASET_HEADER_INVALID: ErrorReason
ERROR_REASON_DATASET_NOT_FOUND: ErrorReason
ERROR_REASON_DATASET_VERSION_NOT_FOUND: ErrorReason
ERROR_REASON_DATASET_VERSION_CONFLICT: ErrorReason
ERROR_REASON_PROVIDER_RATE_LIMITED: ErrorReason
ERROR_REASON_PROVIDER_TIMEOUT: ErrorReason
ERROR_REASON_PROVIDER_HTTP_5XX: ErrorReason
ERROR_REASON_PROVIDER_CONNECTION_ERROR: ErrorReason
ERROR_REASON_PROVIDER_BAD_RESPONSE: ErrorReason
ERROR_REASON_PROVIDER_REJECTED: ErrorReason
ERROR_REASON_PROVIDER_AUTH_FAILED: ErrorReason
ERROR_REASON_SCORER_FAILED: ErrorReason
ERROR_REASON_SCORER_TIMEOUT: ErrorReason
ERROR_REASON_INTERNAL_ERROR: ErrorReason
ERROR_REASON_INVALID_ARGUMENT: ErrorReason
ERROR_REASON_RUN_SPEC_INVALID: ErrorReason
ERROR_REASON_MODEL_NOT_FOUND: ErrorReason
ERROR_REASON_RUN_NOT_FOUND: ErrorReason
ERROR_REASON_REQUEST_ID_CONFLICT: ErrorReason
ERROR_REASON_LIMIT_EXCEEDED: ErrorReason
ERROR_REASON_RUN_NOT_RETRYABLE: ErrorReason
ERROR_REASON_WATCH_SEQ_EXPIRED: ErrorReason
ERROR_REASON_PAGE_TOKEN_INVALID: ErrorReason
ERROR_REASON_UNAUTHENTICATED: ErrorReason
ERROR_REASON_SERVER_DRAINING: ErrorReason
ERROR_REASON_DATASET_UPLOAD_INCOMPLETE: ErrorReason
ERROR_REASON_RUN_NOT_FINISHED: ErrorReason
ERROR_REASON_JUDGE_VERDICT_UNPARSEABLE: ErrorReason
ERROR_REASON_STORE_UNAVAILABLE: ErrorReason
ERROR_REASON_SANDBOX_UNAVAILABLE: ErrorReason

class EvalError(_message.Message):
    __slots__ = ("category", "reason", "message", "retryable", "http_equivalent", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    HTTP_EQUIVALENT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    category: ErrorCategory
    reason: ErrorReason
    message: str
    retryable: bool
    http_equivalent: int
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, category: _Optional[_Union[ErrorCategory, str]] = ..., reason: _Optional[_Union[ErrorReason, str]] = ..., message: _Optional[str] = ..., retryable: _Optional[bool] = ..., http_equivalent: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...
