"""SIGTERM drains the server: health goes NOT_SERVING, new calls are refused with
UNAVAILABLE (SERVER_DRAINING, RetryInfo), open watches end the same way so their
clients resume elsewhere, the process exits 0, and a restart on the same store
finishes the run with nothing finished lost and no event missed or repeated."""

import signal
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import aclosing, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import grpc
import pytest

from evald.v1 import service_pb2
from evald_client import (
    AsyncEvaldClient,
    Heartbeat,
    ReconnectPolicy,
    RunEvent,
    RunState,
    StateChanged,
    SubtaskState,
)
from evald_server.config import parse_config
from tests._shared import classification_records, simulated_model, wait_for
from tests.api._support import assert_reason, fails, failure_of, health_status, raw_stub
from tests.harness import ServerProcess, config_data, running_server, write_config

pytestmark = pytest.mark.anyio

T = TypeVar("T")


async def _in_thread(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


@contextmanager
def _process(tmp_path: Path, data: dict[str, Any]) -> Iterator[ServerProcess]:
    server = ServerProcess(write_config(tmp_path, data))
    try:
        yield server
    finally:
        server.kill()
        if server.process is not None and server.process.stdout is not None:
            server.process.stdout.close()


async def _exit_code(server: ServerProcess) -> int:
    process = server.process
    assert process is not None
    return await _in_thread(lambda: process.wait(timeout=30))


@pytest.mark.anyio
async def test_sigterm_drains_then_a_restart_finishes_the_run(tmp_path: Path) -> None:
    records = 10
    data = config_data(
        tmp_path, models=[simulated_model("sim-200ms", latency_ms=200, max_concurrency=2)]
    )
    with _process(tmp_path, data) as server:
        address = await _in_thread(server.start)
        async with AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="drain",
                version="1.0.0",
                task_type="classification",
                records=classification_records(records, prefix="c"),
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
        assert await _exit_code(server) == 0
        assert "Traceback" not in server.stderr()

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


async def _read_to_the_end(call: Any) -> None:
    while await call.read() is not grpc.aio.EOF:
        pass


async def test_an_open_watch_ends_with_server_draining(tmp_path: Path) -> None:
    data = config_data(tmp_path, models=[simulated_model("sim-slow", latency_ms=30_000)])
    with _process(tmp_path, data) as server:
        address = await _in_thread(server.start)
        async with AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="wait",
                version="1.0.0",
                task_type="classification",
                records=classification_records(3, prefix="c"),
            )
            run = await client.create_run(models=["sim-slow"], datasets=[("wait", "1.0.0")])
        async with raw_stub(address) as stub:
            call = stub.WatchRun(service_pb2.WatchRunRequest(run_id=run.run_id))
            first = await call.read()
            assert first.event.seq == 1
            process = server.process
            assert process is not None
            process.send_signal(signal.SIGTERM)
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await _read_to_the_end(call)
            failure = failure_of(info.value)
        # Not a bare transport error: the contract's status, so clients know to resume.
        assert_reason(failure, grpc.StatusCode.UNAVAILABLE, "SERVER_DRAINING")
        assert failure.retry_delay_s is not None
        assert await _exit_code(server) == 0


async def test_sdk_watch_resumes_across_a_restart_without_gap_or_duplicate(
    tmp_path: Path,
) -> None:
    data = config_data(
        tmp_path, models=[simulated_model("sim-200ms", latency_ms=200, max_concurrency=2)]
    )
    patient = ReconnectPolicy(max_attempts=100, initial_backoff_s=0.05, max_backoff_s=0.2)
    with _process(tmp_path, data) as server:
        address = await _in_thread(server.start)
        async with AsyncEvaldClient(address, reconnect=patient) as client:
            await client.upload_dataset(
                name="across",
                version="1.0.0",
                task_type="classification",
                records=classification_records(12, prefix="c"),
            )
            run = await client.create_run(models=["sim-200ms"], datasets=[("across", "1.0.0")])
            seen: list[RunEvent] = []
            watched = anyio.Event()

            async def watch() -> None:
                try:
                    async with aclosing(client.watch(run.run_id)) as events:
                        seen.extend([e async for e in events if not isinstance(e, Heartbeat)])
                finally:
                    watched.set()

            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(watch)

                    async def some_finished() -> bool:
                        return (await client.get_run(run.run_id)).progress.counts.succeeded >= 2

                    await wait_for(some_finished)
                    process = server.process
                    assert process is not None
                    process.send_signal(signal.SIGTERM)
                    assert await _exit_code(server) == 0
                    # The same address again, with the same store: the watch resumes there.
                    data["server"]["listen"] = address
                    async with running_server(parse_config(data)):
                        await watched.wait()
                        final = await client.get_run(run.run_id)
    seqs = [e.seq for e in seen]
    assert seqs == list(range(1, seqs[-1] + 1)), "no gap, no duplicate across the restart"
    assert seqs[-1] == final.last_seq
    last = seen[-1]
    assert isinstance(last, StateChanged)
    assert last.state is RunState.SUCCEEDED
