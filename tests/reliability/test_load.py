"""100 concurrent watchers (SDK ``watch``) on 3 concurrent runs, with health checks.

Every watcher must see its run's whole log: seqs 1, 2, … with no gap and no repeat,
ending with the terminal state change, identical to the log in the SQLite file. The
health service's Check latency is measured all along and reported (printed, and
recorded as a junit property); only a generous sanity bound is asserted.
"""

import statistics
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from evald_client import (
    AsyncEvaldClient,
    Heartbeat,
    Progress,
    RunEvent,
    SampleFailed,
    StateChanged,
    TaskScored,
)
from tests._shared import classification_records
from tests.harness import ServerProcess
from tests.reliability._support import db_path, query, release, server_config, start_server

pytestmark = pytest.mark.anyio

WATCHERS = 100
CLIENTS = 10  # watchers share channels, as the watchers of one dashboard process would
RUNS = 3
RECORDS = 400
KINDS = {
    Progress: "progress",
    StateChanged: "run_state",
    TaskScored: "task_scored",
    SampleFailed: "sample_failed",
}


def _model(model_id: str) -> dict[str, object]:
    return {
        "id": model_id,
        "provider": "simulated",
        "max_concurrency": 16,
        "simulator": {"accuracy": 0.8, "latency_ms_median": 40.0, "latency_sigma": 0.3},
    }


async def _health_probe(address: str, stop: anyio.Event, latencies: list[float]) -> None:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for _ in range(100_000):  # bounded; ends when the watchers are done
            if stop.is_set():
                return
            started = time.perf_counter()
            response = await stub.Check(health_pb2.HealthCheckRequest(), timeout=30)
            latencies.append(time.perf_counter() - started)
            assert response.status == health_pb2.HealthCheckResponse.SERVING
            await anyio.sleep(0.01)


async def test_hundred_watchers_three_runs(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    config = server_config(tmp_path, [_model("sim-a"), _model("sim-b")])
    server = ServerProcess(config)
    try:
        address = await start_server(server)
        clients = [AsyncEvaldClient(address) for _ in range(CLIENTS)]
        try:
            await clients[0].upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=classification_records(RECORDS),
            )
            runs = [
                await clients[0].create_run(
                    models=["sim-a", "sim-b"][: 1 + i % 2], datasets=[("reviews", "1.0.0")]
                )
                for i in range(RUNS)
            ]
            seen: dict[int, list[RunEvent]] = {}
            latencies: list[float] = []
            done = anyio.Event()

            async def watcher(index: int) -> None:
                client = clients[index % CLIENTS]
                run_id = runs[index % RUNS].run_id
                seen[index] = [e async for e in client.watch(run_id)]

            with anyio.fail_after(120):
                async with anyio.create_task_group() as probes:
                    probes.start_soon(_health_probe, address, done, latencies)
                    async with anyio.create_task_group() as tg:
                        for index in range(WATCHERS):
                            tg.start_soon(watcher, index)
                    done.set()
        finally:
            for client in clients:
                await client.close()
        await anyio.to_thread.run_sync(server.terminate)
    finally:
        server.kill()
        release(server)

    logs = {
        run.run_id: query(
            db_path(tmp_path),
            "SELECT seq, kind FROM events WHERE run_id = ? ORDER BY seq",
            (run.run_id,),
        )
        for run in runs
    }
    assert len(seen) == WATCHERS
    for index, events in seen.items():
        run_id = runs[index % RUNS].run_id
        logged = [(e.seq, KINDS[type(e)]) for e in events if not isinstance(e, Heartbeat)]
        assert [seq for seq, _ in logged] == list(range(1, len(logged) + 1)), "gap or repeat"
        assert logged == logs[run_id], f"watcher {index} saw another log than the store's"
        last = events[-1]
        assert isinstance(last, StateChanged)
        assert last.is_terminal
        assert last.state.value == "succeeded"

    p50 = statistics.median(latencies) * 1000
    p99 = statistics.quantiles(latencies, n=100)[98] * 1000
    record_property("health_check_p50_ms", round(p50, 2))
    record_property("health_check_p99_ms", round(p99, 2))
    print(f"health Check under load: {len(latencies)} calls, p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    assert len(latencies) >= 20
    assert p99 < 2000, "sanity: the health service must keep answering under load"
