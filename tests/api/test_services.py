"""The standard services beside evald.v1: health and reflection (as Python's reflection
client and ``buf curl`` use it), and ListModels as the contract shapes it."""

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import anyio
import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

from evald.v1 import service_pb2, service_pb2_grpc
from evald_client import AsyncEvaldClient
from tests._shared import classification_records, simulated_model
from tests.api._support import health_status, reflected_services
from tests.harness import make_config, running_server

SERVICE = "evald.v1.EvaluationService"
RPCS = [
    "ListModels",
    "UploadDataset",
    "GetDataset",
    "ListDatasets",
    "CreateRun",
    "GetRun",
    "ListRuns",
    "CancelRun",
    "RetryRun",
    "WatchRun",
    "ListResults",
    "ListSamples",
    "CompareRuns",
    "RescoreRun",
]
BUF = Path(".venv/bin/buf")
SECRET_KEY = "sk-test-never-on-the-wire"
T = TypeVar("T")


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    secret = {
        "id": "remote-z",
        "provider": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "EVALD_TEST_SECRET_KEY",
        "model": "gpt-internal",
    }
    models = [simulated_model("sim-b"), secret, simulated_model("sim-a")]
    config = make_config(tmp_path_factory.mktemp("services"), models=models)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EVALD_TEST_SECRET_KEY", SECRET_KEY)
        async with running_server(config) as bound:
            yield bound


@pytest.mark.anyio
async def test_health_is_serving_after_start(address: str) -> None:
    assert await health_status(address) == "SERVING"
    assert await health_status(address, SERVICE) == "SERVING"


@pytest.mark.anyio
async def test_list_models_is_sorted_and_carries_no_secrets(address: str) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
        response = await stub.ListModels(service_pb2.ListModelsRequest())
    assert [m.model_id for m in response.models] == ["remote-z", "sim-a", "sim-b"]
    remote = response.models[0]
    assert (remote.provider, remote.provider_model) == ("openai", "gpt-internal")
    wire = response.SerializeToString()
    assert b"127.0.0.1:9" not in wire
    assert b"EVALD_TEST_SECRET_KEY" not in wire
    assert SECRET_KEY.encode() not in wire


async def _in_thread(fn: Callable[[], T]) -> T:
    """Blocking gRPC calls run off the loop that serves them."""
    return await anyio.to_thread.run_sync(fn)


@pytest.mark.anyio
async def test_reflection_lists_the_service_and_its_methods(address: str) -> None:
    assert SERVICE in await reflected_services(address)

    def describe() -> tuple[list[str], list[str]]:
        with grpc.insecure_channel(address) as channel:
            database = ProtoReflectionDescriptorDatabase(channel)
            services = list(database.get_services())
            pool = descriptor_pool.DescriptorPool(database)
            service = pool.FindServiceByName(SERVICE)
            return services, [m.name for m in service.methods]

    services, methods = await _in_thread(describe)
    assert SERVICE in services
    assert "grpc.health.v1.Health" in services
    assert methods == RPCS


async def _buf_curl(*args: str) -> str:
    command = [str(BUF), "curl", "--protocol", "grpc", "--http2-prior-knowledge", *args]
    with anyio.fail_after(60):
        result = await anyio.run_process(command, check=False)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


@pytest.mark.anyio
async def test_buf_curl_lists_calls_and_watches_through_reflection(address: str) -> None:
    listed = set((await _buf_curl("--list-methods", f"http://{address}")).split())
    assert {f"{SERVICE}/{rpc}" for rpc in RPCS} <= listed
    assert "grpc.health.v1.Health/Check" in listed

    answer = json.loads(await _buf_curl("-d", "{}", f"http://{address}/{SERVICE}/ListModels"))
    assert [m["modelId"] for m in answer["models"]] == ["remote-z", "sim-a", "sim-b"]

    async with AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="curl",
            version="1.0.0",
            task_type="classification",
            records=classification_records(4, prefix="c"),
        )
        run = await client.create_run(models=["sim-a"], datasets=[("curl", "1.0.0")])
        final = await client.wait(run.run_id, timeout_s=30)
    request = json.dumps({"runId": run.run_id})
    streamed = await _buf_curl("-d", request, f"http://{address}/{SERVICE}/WatchRun")
    events = [e["event"] for e in json.loads("[" + streamed.replace("}\n{", "},\n{") + "]")]
    assert [int(e["seq"]) for e in events] == list(range(1, final.last_seq + 1))
    assert events[-1]["stateChanged"]["state"] == "RUN_STATE_SUCCEEDED"


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["grpc-v1", "grpc-v1alpha"])
async def test_reflection_answers_v1_and_v1alpha(address: str, protocol: str) -> None:
    listed = await _buf_curl("--reflect-protocol", protocol, "--list-methods", f"http://{address}")
    assert {f"{SERVICE}/{rpc}" for rpc in RPCS} <= set(listed.split())
    assert "grpc.reflection.v1.ServerReflection/ServerReflectionInfo" in listed.split()
