"""Helpers of the gRPC service tests: raw stubs, the rich error details of a failed
call, small datasets, and bounded waits.

The SDK hides the wire; these tests sometimes need it (the exact ``google.rpc.Status``,
a header-less upload, a stream cut by hand), so they talk to the generated stub here.
"""

from collections.abc import AsyncIterator, Awaitable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from evald.v1 import dataset_pb2, enums_pb2, service_pb2, service_pb2_grpc
from tests._shared import RpcFailure, failure_of

Metadata = tuple[tuple[str, str], ...]


def bearer(token: str) -> Metadata:
    return (("authorization", f"Bearer {token}"),)


async def fails(call: Awaitable[Any]) -> RpcFailure:
    """The failure of a unary (or client-streaming) call that must fail."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return failure_of(info.value)


async def stream_fails(call: Any) -> tuple[list[Any], RpcFailure]:
    """What a server-streaming call yielded before it failed, and the failure."""
    received: list[Any] = []
    try:
        async for message in call:
            received.append(message)
    except grpc.aio.AioRpcError as error:
        return received, failure_of(error)
    raise AssertionError(f"the stream ended OK after {len(received)} messages")


def assert_reason(
    failure: RpcFailure,
    code: grpc.StatusCode,
    reason: str,
    **metadata: str,
) -> None:
    """The code, ``ErrorInfo`` reason and domain, and the given metadata entries."""
    assert (failure.code, failure.reason, failure.domain) == (code, reason, "evald"), failure
    assert failure.detail_types[:1] == ("google.rpc.ErrorInfo",), "ErrorInfo always comes first"
    for key, value in metadata.items():
        assert failure.metadata.get(key) == value, (key, failure.metadata)


@asynccontextmanager
async def raw_stub(address: str) -> AsyncIterator[service_pb2_grpc.EvaluationServiceStub]:
    async with grpc.aio.insecure_channel(address) as channel:
        yield service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]


def header(
    name: str,
    version: str = "1.0.0",
    task_type: enums_pb2.TaskType = enums_pb2.TASK_TYPE_CLASSIFICATION,
    *,
    prompt_template: str | None = None,
) -> service_pb2.UploadDatasetRequest:
    message = dataset_pb2.UploadDatasetHeader(
        name=name, benchmark_version=version, task_type=task_type
    )
    if prompt_template is not None:
        message.prompt_template = prompt_template
    return service_pb2.UploadDatasetRequest(header=message)


def chunk(data: bytes) -> service_pb2.UploadDatasetRequest:
    return service_pb2.UploadDatasetRequest(chunk=data)


def event_kinds(events: Sequence[Any]) -> list[str]:
    """The oneof kind of each ``WatchRunResponse``."""
    return [e.event.WhichOneof("kind") for e in events]


async def reflected_services(address: str, metadata: Metadata = ()) -> list[str]:
    """The services the server lists through the reflection service (one raw exchange)."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        request = reflection_pb2.ServerReflectionRequest(list_services="")
        call = stub.ServerReflectionInfo(iter([request]), metadata=metadata)
        names = [
            service.name
            async for response in call
            for service in response.list_services_response.service
        ]
    return sorted(names)


async def health_status(address: str, service: str = "", metadata: Metadata = ()) -> str:
    """The health service's answer for ``service``: "SERVING", "NOT_SERVING", …"""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = await stub.Check(
            health_pb2.HealthCheckRequest(service=service), metadata=metadata, timeout=10
        )
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))
