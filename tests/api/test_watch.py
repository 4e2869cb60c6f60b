"""WatchRun: a stream cut mid-way and resumed from the last seq misses nothing and
repeats nothing; a finished run replays in full and ends OK; a cursor older than the
retained log is OUT_OF_RANGE with oldestSeq; a client deadline ends only that stream."""

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import grpc
import pytest

from evald.v1 import enums_pb2, service_pb2
from evald_client import (
    AsyncEvaldClient,
    Heartbeat,
    OutOfRange,
    RetryPolicy,
    RunEvent,
    RunState,
    SampleFailed,
    StateChanged,
)
from tests._shared import classification_records, simulated_model
from tests.api._support import assert_reason, raw_stub, stream_fails
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

RETAINED = 100  # the smallest events_retained_per_run the config accepts
NO_RETRIES = RetryPolicy(max_retries=0)
TERMINAL = {
    enums_pb2.RUN_STATE_SUCCEEDED,
    enums_pb2.RUN_STATE_PARTIAL,
    enums_pb2.RUN_STATE_FAILED,
    enums_pb2.RUN_STATE_CANCELLED,
}


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    config = make_config(
        tmp_path_factory.mktemp("watch"),
        models=[
            # Half the calls fail for good (no retries): a sample_failed event each.
            simulated_model("sim-flaky", latency_ms=15, max_concurrency=2, fault_rate=0.5),
            simulated_model("sim-broken", latency_ms=0, max_concurrency=8, fault_rate=1.0),
            simulated_model("sim-slow", latency_ms=30_000, max_concurrency=1),
        ],
        limits={"events_retained_per_run": RETAINED},
    )
    async with running_server(config) as bound, AsyncEvaldClient(bound) as client:
        await client.upload_dataset(
            name="small",
            version="1.0.0",
            task_type="classification",
            records=classification_records(24, prefix="c"),
        )
        await client.upload_dataset(
            name="large",
            version="1.0.0",
            task_type="classification",
            records=classification_records(RETAINED + 10),
        )
        yield bound


def _logged(events: list[RunEvent]) -> list[RunEvent]:
    return [e for e in events if not isinstance(e, Heartbeat)]


def _is_terminal_response(response: service_pb2.WatchRunResponse) -> bool:
    event = response.event
    return event.WhichOneof("kind") == "state_changed" and event.state_changed.state in TERMINAL


async def test_watch_cut_mid_stream_resumes_without_gap_or_duplicate(address: str) -> None:
    async with AsyncEvaldClient(address) as client, raw_stub(address) as stub:
        run = await client.create_run(
            models=["sim-flaky"], datasets=[("small", "1.0.0")], retry_policy=NO_RETRIES
        )
        # First connection: a few events, then the client drops the stream.
        call = stub.WatchRun(service_pb2.WatchRunRequest(run_id=run.run_id))
        first: list[int] = []
        first_failures = 0
        async for response in call:
            kind = response.event.WhichOneof("kind")
            if kind != "heartbeat":
                first.append(response.event.seq)
                first_failures += kind == "sample_failed"
            if len(first) == 3:
                break
        call.cancel()
        assert first == [1, 2, 3]

        # Second connection: from the last seq seen, to the end.
        async with aclosing(client.watch(run.run_id, after_seq=first[-1])) as events:
            rest = _logged([e async for e in events])
        seqs = first + [e.seq for e in rest]
        assert seqs == list(range(1, seqs[-1] + 1)), "no gap, no duplicate"
        last = rest[-1]
        assert isinstance(last, StateChanged)
        assert last.is_terminal
        final = await client.get_run(run.run_id)
        assert last.state is final.state
        assert seqs[-1] == final.last_seq
        failed = [e for e in rest if isinstance(e, SampleFailed)]
        assert first_failures + len(failed) == final.progress.counts.failed_permanent > 0


async def test_watch_resumed_on_a_live_run_follows_it_to_the_end(address: str) -> None:
    async with AsyncEvaldClient(address) as client, raw_stub(address) as stub:
        slow = await client.create_run(models=["sim-slow"], datasets=[("small", "1.0.0")])
        call = stub.WatchRun(service_pb2.WatchRunRequest(run_id=slow.run_id))
        first = []
        async for response in call:
            first.append(response.event)
            if response.event.state_changed.state == enums_pb2.RUN_STATE_RUNNING:
                break
        call.cancel()
        assert not (await client.get_run(slow.run_id)).is_terminal, "cut while the run is live"
        rest: list[RunEvent] = []

        async def resume() -> None:
            async with aclosing(client.watch(slow.run_id, after_seq=first[-1].seq)) as events:
                rest.extend(_logged([e async for e in events]))

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(resume)
                await client.cancel_run(slow.run_id)
        seqs = [e.seq for e in first] + [e.seq for e in rest]
        assert seqs == list(range(1, seqs[-1] + 1))
        assert isinstance(rest[-1], StateChanged)
        assert rest[-1].state is RunState.CANCELLED


async def test_many_watchers_see_the_same_log(address: str) -> None:
    async with AsyncEvaldClient(address) as client:
        run = await client.create_run(
            models=["sim-flaky"], datasets=[("small", "1.0.0")], retry_policy=NO_RETRIES
        )
        seen: dict[int, list[int]] = {}

        async def watch(index: int) -> None:
            async with aclosing(client.watch(run.run_id)) as events:
                seen[index] = [e.seq for e in _logged([e async for e in events])]

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                for index in range(6):
                    tg.start_soon(watch, index)
        final = await client.get_run(run.run_id)
        expected = list(range(1, final.last_seq + 1))
        assert all(seqs == expected for seqs in seen.values()), seen


async def test_watching_a_finished_run_replays_everything_and_ends_ok(address: str) -> None:
    async with AsyncEvaldClient(address) as client, raw_stub(address) as stub:
        run = await client.create_run(
            models=["sim-flaky"], datasets=[("small", "1.0.0")], retry_policy=NO_RETRIES
        )
        final = await client.wait(run.run_id, timeout_s=30)
        for after_seq in (0, 5, final.last_seq - 1):
            call = stub.WatchRun(
                service_pb2.WatchRunRequest(run_id=run.run_id, after_seq=after_seq)
            )
            responses = [r async for r in call]
            assert await call.code() is grpc.StatusCode.OK
            seqs = [r.event.seq for r in responses]
            assert seqs == list(range(after_seq + 1, final.last_seq + 1))
            assert _is_terminal_response(responses[-1])
            assert responses[-1].event.state_changed.state == enums_pb2.RunState.Value(
                f"RUN_STATE_{final.state.name}"
            )
        # From the very end: nothing to replay, and the stream still ends OK.
        call = stub.WatchRun(
            service_pb2.WatchRunRequest(run_id=run.run_id, after_seq=final.last_seq)
        )
        assert [r async for r in call] == []
        assert await call.code() is grpc.StatusCode.OK


async def test_cursor_older_than_the_retained_log_is_out_of_range(address: str) -> None:
    async with AsyncEvaldClient(address) as client, raw_stub(address) as stub:
        run = await client.create_run(
            models=["sim-broken"], datasets=[("large", "1.0.0")], retry_policy=NO_RETRIES
        )
        final = await client.wait(run.run_id, timeout_s=30)
        assert final.state is RunState.FAILED
        assert final.last_seq > RETAINED
        oldest = final.last_seq - RETAINED + 1
        for stale in (0, oldest - 2):
            request = service_pb2.WatchRunRequest(run_id=run.run_id, after_seq=stale)
            received, failure = await stream_fails(stub.WatchRun(request))
            assert received == []
            assert_reason(
                failure, grpc.StatusCode.OUT_OF_RANGE, "WATCH_SEQ_EXPIRED", oldestSeq=str(oldest)
            )
        # The SDK surfaces it as OutOfRange, with the metadata to recover from.
        async with aclosing(client.watch(run.run_id)) as events:
            with pytest.raises(OutOfRange) as info:
                await anext(events)
        assert info.value.metadata["oldestSeq"] == str(oldest)
        # From oldestSeq - 1 every retained event replays, up to the terminal one.
        call = stub.WatchRun(service_pb2.WatchRunRequest(run_id=run.run_id, after_seq=oldest - 1))
        seqs = [r.event.seq async for r in call]
        assert seqs == list(range(oldest, final.last_seq + 1))
        assert len(seqs) == RETAINED


async def test_client_deadline_ends_only_that_watch(address: str) -> None:
    async with AsyncEvaldClient(address) as client, raw_stub(address) as stub:
        slow = await client.create_run(models=["sim-slow"], datasets=[("small", "1.0.0")])
        patient: list[Any] = []

        async def watch_patiently() -> None:
            call = stub.WatchRun(service_pb2.WatchRunRequest(run_id=slow.run_id))
            patient.extend([r async for r in call])
            patient.append(await call.code())

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_patiently)
                request = service_pb2.WatchRunRequest(run_id=slow.run_id)
                received, failure = await stream_fails(stub.WatchRun(request, timeout=0.5))
                assert failure.code is grpc.StatusCode.DEADLINE_EXCEEDED
                seqs = [r.event.seq for r in received]
                assert seqs == list(range(1, len(seqs) + 1)), "replayed in order, then waited"
                # The server goes on serving: unary calls and the other watcher.
                assert {m.model_id for m in await client.list_models()} == {
                    "sim-broken",
                    "sim-flaky",
                    "sim-slow",
                }
                cancelled = await client.cancel_run(slow.run_id)
                assert cancelled.run_id == slow.run_id
        assert patient[-1] is grpc.StatusCode.OK
        assert _is_terminal_response(patient[-2])
        assert patient[-2].event.state_changed.state == enums_pb2.RUN_STATE_CANCELLED


async def test_a_snapshots_completed_count_is_the_same_from_any_cursor(address: str) -> None:
    """``completed_since_last`` counts the completions since the run's previous snapshot
    (the progress tracker's count, stored with it): a watch that starts just before a
    snapshot reads the same count as one that saw every snapshot before it."""
    async with AsyncEvaldClient(address) as client, raw_stub(address) as stub:
        run = await client.create_run(
            models=["sim-flaky"], datasets=[("small", "1.0.0")], retry_policy=NO_RETRIES
        )
        await client.wait(run.run_id, timeout_s=30)

        async def replay(after_seq: int) -> list[service_pb2.WatchRunResponse]:
            request = service_pb2.WatchRunRequest(run_id=run.run_id, after_seq=after_seq)
            return [r async for r in stub.WatchRun(request)]

        full = [r.event for r in await replay(0) if r.event.WhichOneof("kind") == "progress"]
        assert full, "the run wrote no progress snapshot"
        counts = [e.progress.completed_since_last for e in full]
        last = full[-1].progress.progress.counts
        terminal = last.succeeded + last.failed_permanent + last.cancelled
        assert 0 < sum(counts) <= terminal
        for event in full:
            resumed = (await replay(event.seq - 1))[0].event
            assert resumed.seq == event.seq
            assert resumed.progress.completed_since_last == event.progress.completed_since_last
