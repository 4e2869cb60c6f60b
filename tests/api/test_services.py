"""The standard services beside evald.v1: health, reflection (as Python's reflection
client and ``buf curl`` use it), ListModels as the contract shapes it, and the drain on
SIGTERM (NOT_SERVING, new calls refused with SERVER_DRAINING, exit 0, nothing lost)."""

import json
import signal
import sqlite3
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
from evald_client import AsyncEvaldClient, RunState, SubtaskState
from evald_server.config import parse_config
from tests.api._support import (
    assert_reason,
    classification,
    fails,
    health_status,
    raw_stub,
    reflected_services,
    simulated,
    wait_for,
)
from tests.harness import ServerProcess, config_data, make_config, running_server, write_config

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
]
BUF = Path(".venv/bin/buf")
SECRET_KEY = "sk-test-never-on-the-wire"
T = TypeVar("T")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    secret = {
        "id": "remote-z",
        "provider": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "EVALD_TEST_SECRET_KEY",
        "model": "gpt-internal",
    }
    models = [simulated("sim-b"), secret, simulated("sim-a")]
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
            name="curl", version="1.0.0", task_type="classification", records=classification(4)
        )
        run = await client.create_run(models=["sim-a"], datasets=[("curl", "1.0.0")])
        final = await client.wait(run.run_id, timeout_s=30)
    request = json.dumps({"runId": run.run_id})
    streamed = await _buf_curl("-d", request, f"http://{address}/{SERVICE}/WatchRun")
    events = [e["event"] for e in json.loads("[" + streamed.replace("}\n{", "},\n{") + "]")]
    assert [int(e["seq"]) for e in events] == list(range(1, final.last_seq + 1))
    assert events[-1]["stateChanged"]["state"] == "RUN_STATE_SUCCEEDED"


@pytest.mark.anyio
async def test_sigterm_drains_then_a_restart_finishes_the_run(tmp_path: Path) -> None:
    records = 10
    data = config_data(tmp_path, models=[simulated("sim-200ms", latency_ms=200, max_concurrency=2)])
    server = ServerProcess(write_config(tmp_path, data))
    address = await _in_thread(server.start)
    try:
        async with AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="drain",
                version="1.0.0",
                task_type="classification",
                records=classification(records),
            )
            run = await client.create_run(models=["sim-200ms"], datasets=[("drain", "1.0.0")])

            async def some_finished() -> bool:
                return (await client.get_run(run.run_id)).progress.counts.succeeded >= 2

            await wait_for(some_finished)
            done_before = {
                s.subtask_id: s
                async for s in client.samples(run.run_id, state=SubtaskState.SUCCEEDED)
            }
        # A writer holds the store's lock, so the drain's last write waits for it and the
        # draining server stays observable; the lock is released once that is checked.
        lock = sqlite3.connect(
            tmp_path / "evald.sqlite3", isolation_level=None, timeout=30, check_same_thread=False
        )
        await _in_thread(lambda: lock.execute("BEGIN IMMEDIATE"))
        try:
            process = server.process
            assert process is not None
            process.send_signal(signal.SIGTERM)

            async def not_serving() -> bool:
                return await health_status(address) == "NOT_SERVING"

            await wait_for(not_serving)
            async with raw_stub(address) as stub:
                refused = await fails(stub.GetRun(service_pb2.GetRunRequest(run_id=run.run_id)))
            assert_reason(refused, grpc.StatusCode.UNAVAILABLE, "SERVER_DRAINING")
            assert refused.retry_delay_s is not None
            assert refused.retry_delay_s > 0
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert await _in_thread(lambda: process.wait(timeout=30) == 0)
        assert "Traceback" not in server.stderr()
    finally:
        server.kill()
        if server.process is not None and server.process.stdout is not None:
            server.process.stdout.close()

    # The restart (in process this time) resumes the run on the same store.
    async with running_server(parse_config(data)) as address, AsyncEvaldClient(address) as client:
        final = await client.wait(run.run_id, timeout_s=60)
        assert final.state is RunState.SUCCEEDED
        assert final.progress.counts.succeeded == records
        after = {s.subtask_id: s async for s in client.samples(run.run_id)}
        for subtask_id, before in done_before.items():
            kept = after[subtask_id]
            assert (kept.state, kept.output, kept.attempts) == (
                SubtaskState.SUCCEEDED,
                before.output,
                before.attempts,
            ), "finished work is kept, not redone"
        (result,) = await client.results(run.run_id)
        assert result.execution.samples_succeeded == records
