"""Small proto building blocks shared by the converters: times, durations, params, errors."""

import math

from google.protobuf import duration_pb2, timestamp_pb2

from evald.v1 import errors_pb2, model_pb2, run_pb2
from evald_server.api._convert_enums import to_proto_enum
from evald_server.config import GenerationParams
from evald_server.domain import Cost, EvalError, RetryCounts


def timestamp(epoch_s: float) -> timestamp_pb2.Timestamp:
    whole = math.floor(epoch_s)
    return timestamp_pb2.Timestamp(seconds=whole, nanos=int((epoch_s - whole) * 1e9))


def duration(seconds: float) -> duration_pb2.Duration:
    whole = math.floor(seconds)
    return duration_pb2.Duration(seconds=whole, nanos=int((seconds - whole) * 1e9))


def seconds_of(value: duration_pb2.Duration) -> float:
    return value.seconds + value.nanos / 1e9


def params_to_proto(params: GenerationParams) -> model_pb2.GenerationParams:
    message = model_pb2.GenerationParams(stop=params.stop)
    if params.temperature is not None:
        message.temperature = params.temperature
    if params.max_tokens is not None:
        message.max_tokens = params.max_tokens
    if params.top_p is not None:
        message.top_p = params.top_p
    if params.seed is not None:
        message.seed = params.seed
    return message


def params_from_proto(message: model_pb2.GenerationParams) -> dict[str, object]:
    """Only the fields the caller set, so unset ones keep the model's defaults."""
    values: dict[str, object] = {
        name: getattr(message, name)
        for name in ("temperature", "max_tokens", "top_p", "seed")
        if message.HasField(name)
    }
    if message.stop:
        values["stop"] = tuple(message.stop)
    return values


def eval_error_to_proto(error: EvalError) -> errors_pb2.EvalError:
    return errors_pb2.EvalError(
        category=to_proto_enum(error.category),
        reason=to_proto_enum(error.reason),
        message=error.message,
        retryable=error.retryable,
        http_equivalent=error.http_equivalent,
        metadata=dict(error.metadata),
    )


def cost_to_proto(cost: Cost) -> run_pb2.Cost:
    return run_pb2.Cost(
        cost_usd=cost.cost_usd if cost.priced else 0.0,
        estimated=cost.estimated,
        tokens=cost.tokens,
        priced=cost.priced,
    )


def retry_counts_to_proto(counts: RetryCounts) -> run_pb2.RetryCounts:
    return run_pb2.RetryCounts(
        rate_limited=counts.rate_limited, timeout=counts.timeout, transient=counts.transient
    )
