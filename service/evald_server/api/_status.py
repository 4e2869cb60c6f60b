"""Server errors → ``google.rpc.Status`` with ErrorInfo, BadRequest and RetryInfo.

The gRPC code and the ErrorInfo reason come from the one error table
(``evald_server.domain._error_table``); ErrorInfo.reason is the reason's UPPER_SNAKE
name and its domain is always ``evald``.
"""

import math

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from evald_server.domain import ErrorReason, EvaldError, FieldViolation, mapping_for

ERROR_DOMAIN = "evald"


def grpc_code_for(reason: ErrorReason) -> grpc.StatusCode:
    return grpc.StatusCode[mapping_for(reason).grpc_code]


def _pack(message: object) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)  # type: ignore[arg-type]
    return packed


def _duration(seconds: float) -> duration_pb2.Duration:
    whole = math.floor(seconds)
    return duration_pb2.Duration(seconds=whole, nanos=int((seconds - whole) * 1e9))


def rpc_status_for(error: EvaldError) -> status_pb2.Status:
    """The full ``google.rpc.Status`` for an expected request failure."""
    code = grpc_code_for(error.reason)
    details = [
        _pack(
            error_details_pb2.ErrorInfo(
                reason=error.reason.name, domain=ERROR_DOMAIN, metadata=error.metadata
            )
        )
    ]
    field_violations = error.field_violations
    if (
        not field_violations
        and code is grpc.StatusCode.INVALID_ARGUMENT
        and error.metadata.get("field")
    ):
        # The contract promises BadRequest whenever a request field is at fault.
        field_violations = (FieldViolation(error.metadata["field"], error.message),)
    if field_violations:
        violations = [
            error_details_pb2.BadRequest.FieldViolation(
                field=violation.field, description=violation.description
            )
            for violation in field_violations
        ]
        details.append(_pack(error_details_pb2.BadRequest(field_violations=violations)))
    if error.retry_after_s is not None:
        details.append(
            _pack(error_details_pb2.RetryInfo(retry_delay=_duration(error.retry_after_s)))
        )
    return status_pb2.Status(code=code.value[0], message=error.message, details=details)


def internal_status() -> status_pb2.Status:
    """What a client sees for a bug: no internals, only the reason."""
    info = error_details_pb2.ErrorInfo(reason=ErrorReason.INTERNAL_ERROR.name, domain=ERROR_DOMAIN)
    return status_pb2.Status(
        code=code_pb2.INTERNAL,
        message="internal error; the server logged the details",
        details=[_pack(info)],
    )


def to_grpc_status(status: status_pb2.Status) -> grpc.Status:
    return rpc_status.to_status(status)
