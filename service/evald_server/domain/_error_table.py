"""The one mapping from an error reason to its category, gRPC code and HTTP equivalent.

gRPC codes are spelled as ``grpc.StatusCode`` member names so that this module stays
free of grpc imports; the API layer resolves them. The documented table of every
reason is in docs/CONTRACT.md ("Errors", between its ``error-table`` markers);
``contract_tests/test_error_mapping.py`` checks it against this table entry by entry
(category, gRPC code, HTTP equivalent, retryability) and both against the proto enums.
"""

from dataclasses import dataclass

from evald_server.domain._enums import ErrorCategory, ErrorReason


@dataclass(frozen=True, slots=True)
class ErrorMapping:
    category: ErrorCategory
    grpc_code: str
    http_equivalent: int
    retryable: bool


_C = ErrorCategory
_R = ErrorReason

ERROR_TABLE: dict[ErrorReason, ErrorMapping] = {
    # The uploader must fix the data.
    _R.DATASET_PARSE_ERROR: ErrorMapping(_C.DATASET_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.DATASET_FIELD_MISSING: ErrorMapping(_C.DATASET_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.DATASET_FIELD_INVALID: ErrorMapping(_C.DATASET_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.DATASET_DUPLICATE_ID: ErrorMapping(_C.DATASET_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.DATASET_EMPTY: ErrorMapping(_C.DATASET_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.DATASET_TOO_LARGE: ErrorMapping(_C.DATASET_INVALID, "RESOURCE_EXHAUSTED", 413, False),
    _R.DATASET_ENCODING_ERROR: ErrorMapping(_C.DATASET_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.DATASET_HEADER_INVALID: ErrorMapping(_C.DATASET_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.DATASET_NOT_FOUND: ErrorMapping(_C.DATASET_INVALID, "NOT_FOUND", 404, False),
    _R.DATASET_VERSION_NOT_FOUND: ErrorMapping(_C.DATASET_INVALID, "NOT_FOUND", 404, False),
    _R.DATASET_VERSION_CONFLICT: ErrorMapping(_C.DATASET_INVALID, "ALREADY_EXISTS", 409, False),
    _R.DATASET_UPLOAD_INCOMPLETE: ErrorMapping(_C.DATASET_INVALID, "INVALID_ARGUMENT", 400, False),
    # The provider failed; transient ones are retried by the engine.
    _R.PROVIDER_RATE_LIMITED: ErrorMapping(_C.MODEL_PROVIDER_ERROR, "UNAVAILABLE", 502, True),
    _R.PROVIDER_TIMEOUT: ErrorMapping(_C.MODEL_PROVIDER_ERROR, "DEADLINE_EXCEEDED", 502, True),
    _R.PROVIDER_HTTP_5XX: ErrorMapping(_C.MODEL_PROVIDER_ERROR, "UNAVAILABLE", 502, True),
    _R.PROVIDER_CONNECTION_ERROR: ErrorMapping(_C.MODEL_PROVIDER_ERROR, "UNAVAILABLE", 502, True),
    _R.PROVIDER_BAD_RESPONSE: ErrorMapping(_C.MODEL_PROVIDER_ERROR, "UNAVAILABLE", 502, True),
    _R.PROVIDER_REJECTED: ErrorMapping(_C.MODEL_PROVIDER_ERROR, "UNAVAILABLE", 502, False),
    _R.PROVIDER_AUTH_FAILED: ErrorMapping(_C.MODEL_PROVIDER_ERROR, "UNAVAILABLE", 502, False),
    # A judge's answer without a verdict in the asked format: asked again, boundedly.
    _R.JUDGE_VERDICT_UNPARSEABLE: ErrorMapping(_C.MODEL_PROVIDER_ERROR, "UNAVAILABLE", 502, True),
    # evald's operators must act.
    _R.SCORER_FAILED: ErrorMapping(_C.EVAL_OPERATOR_ERROR, "INTERNAL", 500, False),
    _R.SCORER_TIMEOUT: ErrorMapping(_C.EVAL_OPERATOR_ERROR, "INTERNAL", 500, False),
    _R.INTERNAL_ERROR: ErrorMapping(_C.EVAL_OPERATOR_ERROR, "INTERNAL", 500, False),
    # The caller must fix the request.
    _R.INVALID_ARGUMENT: ErrorMapping(_C.REQUEST_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.RUN_SPEC_INVALID: ErrorMapping(_C.REQUEST_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.MODEL_NOT_FOUND: ErrorMapping(_C.REQUEST_INVALID, "NOT_FOUND", 404, False),
    _R.RUN_NOT_FOUND: ErrorMapping(_C.REQUEST_INVALID, "NOT_FOUND", 404, False),
    _R.REQUEST_ID_CONFLICT: ErrorMapping(_C.REQUEST_INVALID, "ALREADY_EXISTS", 409, False),
    _R.LIMIT_EXCEEDED: ErrorMapping(_C.REQUEST_INVALID, "RESOURCE_EXHAUSTED", 429, False),
    _R.RUN_NOT_RETRYABLE: ErrorMapping(_C.REQUEST_INVALID, "FAILED_PRECONDITION", 400, False),
    _R.RUN_NOT_FINISHED: ErrorMapping(_C.REQUEST_INVALID, "FAILED_PRECONDITION", 400, False),
    _R.WATCH_SEQ_EXPIRED: ErrorMapping(_C.REQUEST_INVALID, "OUT_OF_RANGE", 400, False),
    _R.PAGE_TOKEN_INVALID: ErrorMapping(_C.REQUEST_INVALID, "INVALID_ARGUMENT", 400, False),
    _R.UNAUTHENTICATED: ErrorMapping(_C.REQUEST_INVALID, "UNAUTHENTICATED", 401, False),
    _R.SERVER_DRAINING: ErrorMapping(_C.EVAL_OPERATOR_ERROR, "UNAVAILABLE", 503, True),
    _R.STORE_UNAVAILABLE: ErrorMapping(_C.EVAL_OPERATOR_ERROR, "UNAVAILABLE", 503, True),
    # Code datasets need the sandbox, which this server has not enabled (or that cannot
    # run on its machine): the request cannot be served here as it is.
    _R.SANDBOX_UNAVAILABLE: ErrorMapping(_C.REQUEST_INVALID, "FAILED_PRECONDITION", 400, False),
}


def mapping_for(reason: ErrorReason) -> ErrorMapping:
    """The category, gRPC code and HTTP equivalent of ``reason``."""
    return ERROR_TABLE[reason]
