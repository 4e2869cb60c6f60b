"""kill -9 of the server at five points of a run, restart on the same SQLite file.

Each test: the run completes; every subtask is stored once and terminal; the run's
and tasks' counters equal a recount of the rows (read with sqlite3, not evald); the
fake provider's journal shows no request, after the kill, for a subtask that the
store had as succeeded, and only calls in flight at the kill were answered twice
(none at all where nothing was in flight); the dead server's scoring workers exit.
"""

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import grpc
import pytest

from evald.v1 import dataset_pb2, enums_pb2, service_pb2, service_pb2_grpc
from evald_client import (
    Progress,
    RetryPolicy,
    RunEvent,
    StateChanged,
    TaskScored,
    Unavailable,
)
from tests._shared import classification_records, jsonl, wait_for
from tests.reliability._rig import Rig, rig
from tests.reliability._support import query, task_states

pytestmark = pytest.mark.anyio

RECORDS = 300
CONCURRENCY = 8
CLASSIFICATION = enums_pb2.TASK_TYPE_CLASSIFICATION
KINDS = {Progress: "progress", StateChanged: "run_state", TaskScored: "task_scored"}


async def _finish_and_check(the_rig: Rig, run_id: str, *, subtasks: int = RECORDS) -> None:
    final = await the_rig.finish(run_id)
    assert final.state.value == "succeeded"
    the_rig.assert_complete(run_id, subtasks)
    async with the_rig.client() as client:
        results = await client.results(run_id)
    assert [r.status.value for r in results] == ["success"]
    assert results[0].execution.samples_succeeded == subtasks
    scored = query(
        the_rig.db,
        "SELECT COUNT(*) FROM events WHERE run_id = ? AND kind = 'task_scored'",
        (run_id,),
    )
    assert scored == [(1,)], "each task is scored exactly once"


async def _ok_answers(the_rig: Rig) -> int:
    outcomes: dict[str, int] = (await the_rig.fake.control.stats())["outcomes"]
    return outcomes.get("ok", 0)


async def test_kill_during_upload_stores_nothing_and_reupload_works(tmp_path: Path) -> None:
    async with rig(tmp_path, max_concurrency=CONCURRENCY) as the_rig:
        address = await the_rig.start()
        body = jsonl(classification_records(RECORDS))
        sent = anyio.Event()
        never = anyio.Event()

        async def requests() -> AsyncIterator[service_pb2.UploadDatasetRequest]:
            header = dataset_pb2.UploadDatasetHeader(
                name="reviews",
                benchmark_version="1.0.0",
                task_type=CLASSIFICATION,
            )
            yield service_pb2.UploadDatasetRequest(header=header)
            for start in range(0, len(body) // 2, 4096):  # half the body, then stall
                yield service_pb2.UploadDatasetRequest(chunk=body[start : start + 4096])
            sent.set()
            await never.wait()

        async with grpc.aio.insecure_channel(address) as channel:
            stub = service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
            call = stub.UploadDataset(requests(), timeout=60)
            with anyio.fail_after(30):
                await sent.wait()
            await anyio.sleep(0.2)  # let the chunks reach the server (sequencing, not a check)
            crash = await the_rig.kill()
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
        assert query(the_rig.db, "SELECT COUNT(*) FROM datasets") == [(0,)]
        assert query(the_rig.db, "SELECT COUNT(*) FROM dataset_records") == [(0,)]

        address = await the_rig.start()
        run_id = await the_rig.upload_and_run(address, RECORDS)
        await _finish_and_check(the_rig, run_id)
        assert await the_rig.fake.control.duplicates_after_success() == {}
        await the_rig.assert_orphans_exit(crash)


async def test_kill_right_after_create_run(tmp_path: Path) -> None:
    async with rig(tmp_path, max_concurrency=CONCURRENCY) as the_rig:
        address = await the_rig.start()
        run_id = await the_rig.upload_and_run(address, RECORDS)
        crash = await the_rig.kill()  # CreateRun has just returned: dispatch is starting
        stored = query(the_rig.db, "SELECT COUNT(*) FROM subtasks WHERE run_id = ?", (run_id,))
        assert stored == [(RECORDS,)], "persist before dispatch: every subtask is stored"

        await the_rig.start()
        await _finish_and_check(the_rig, run_id)
        await the_rig.assert_no_finished_work_repeated(crash)
        await the_rig.assert_orphans_exit(crash)


async def test_kill_mid_inference(tmp_path: Path) -> None:
    async with rig(tmp_path, max_concurrency=CONCURRENCY) as the_rig:
        address = await the_rig.start()
        run_id = await the_rig.upload_and_run(address, RECORDS)

        async def a_third_answered() -> bool:
            return await _ok_answers(the_rig) >= RECORDS // 3

        await wait_for(a_third_answered, timeout_s=60)
        crash = await the_rig.kill()
        assert 0 < len(crash.finished) < RECORDS

        await the_rig.start()
        await _finish_and_check(the_rig, run_id)
        await the_rig.assert_no_finished_work_repeated(crash)
        await the_rig.assert_orphans_exit(crash)


async def test_kill_during_scoring(tmp_path: Path) -> None:
    async with rig(tmp_path, max_concurrency=CONCURRENCY) as the_rig:
        address = await the_rig.start()
        run_id = await the_rig.upload_and_run(address, RECORDS)

        async def scoring() -> bool:
            return "scoring" in task_states(the_rig.db).values()

        await wait_for(scoring, timeout_s=60, every_s=0.005)
        crash = await the_rig.kill()
        assert list(task_states(the_rig.db).values()) == ["scoring"]
        assert len(crash.finished) == RECORDS, "a task is scored only once all is terminal"
        assert query(the_rig.db, "SELECT COUNT(*) FROM results") == [(0,)]

        await the_rig.start()
        await _finish_and_check(the_rig, run_id)
        # All inference was durable before scoring began: nothing at all is asked again.
        assert await the_rig.fake.control.duplicates_after_success() == {}
        after = await the_rig.fake.control.journal(since=crash.journal_boundary)
        assert after == []
        await the_rig.assert_orphans_exit(crash)


async def test_kill_while_a_watcher_streams(tmp_path: Path) -> None:
    async with rig(tmp_path, max_concurrency=CONCURRENCY) as the_rig:
        address = await the_rig.start()
        run_id = await the_rig.upload_and_run(address, RECORDS)
        before: list[RunEvent] = []
        progress_seen = anyio.Event()
        broke = anyio.Event()

        async def watch() -> None:
            async with the_rig.client(address) as client:
                try:
                    async for event in client.watch(run_id):
                        before.append(event)
                        if sum(isinstance(e, Progress) for e in before) >= 2:
                            progress_seen.set()
                except Unavailable:
                    broke.set()  # the server died under the stream, as it should

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            with anyio.fail_after(60):
                await progress_seen.wait()
            crash = await the_rig.kill()
            with anyio.fail_after(30):
                await broke.wait()
        assert 0 < len(crash.finished) < RECORDS, "killed mid-run"

        logged = [e for e in before if type(e) in KINDS]
        stored = query(
            the_rig.db,
            "SELECT seq, kind FROM events WHERE run_id = ? ORDER BY seq",
            (run_id,),
        )
        # Every event a watcher saw was durable: the restarted server has the same log.
        assert [(e.seq, KINDS[type(e)]) for e in logged] == stored[: len(logged)]

        address = await the_rig.start()
        after: list[RunEvent] = []
        async with the_rig.client(address) as client:
            with anyio.fail_after(90):
                async for event in client.watch(run_id, after_seq=logged[-1].seq):
                    after.append(event)
        seqs = [e.seq for e in [*logged, *after] if type(e) in KINDS]
        assert seqs == list(range(1, seqs[-1] + 1)), "no gap and no duplicate across the crash"
        last = after[-1]
        assert isinstance(last, StateChanged)
        assert last.is_terminal
        assert any(isinstance(e, TaskScored) for e in after)
        await _finish_and_check(the_rig, run_id)
        await the_rig.assert_no_finished_work_repeated(crash)
        await the_rig.assert_orphans_exit(crash)


@pytest.mark.slow
async def test_kill_while_the_server_stores_a_large_upload(tmp_path: Path) -> None:
    """The client has sent everything; the server is parsing or storing it when it dies.
    Each time: the dataset is there whole, or not at all."""
    records = 30_000
    body = jsonl(classification_records(records))
    async with rig(tmp_path, max_concurrency=CONCURRENCY) as the_rig:
        for delay_s in (0.05, 0.3, 0.8, 1.5):
            address = await the_rig.start()

            async def requests() -> AsyncIterator[service_pb2.UploadDatasetRequest]:
                header = dataset_pb2.UploadDatasetHeader(
                    name="big", benchmark_version="1.0.0", task_type=CLASSIFICATION
                )
                yield service_pb2.UploadDatasetRequest(header=header)
                for start in range(0, len(body), 2**20):
                    yield service_pb2.UploadDatasetRequest(chunk=body[start : start + 2**20])

            async with grpc.aio.insecure_channel(address) as channel:
                stub = service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
                call = stub.UploadDataset(requests(), timeout=60)
                await anyio.sleep(delay_s)  # somewhere in parsing or storing
                await the_rig.kill()
                with contextlib.suppress(grpc.aio.AioRpcError):
                    await call
            stored = query(the_rig.db, "SELECT record_count FROM datasets")
            rows = query(the_rig.db, "SELECT COUNT(*) FROM dataset_records")
            assert (stored, rows) in (([], [(0,)]), ([(records,)], [(records,)])), delay_s
        address = await the_rig.start()
        async with the_rig.client(address) as client:
            dataset = await client.upload_dataset(
                name="big",
                version="1.0.0",
                task_type="classification",
                records=classification_records(records),
            )
        assert dataset.record_count == records


@pytest.mark.slow
async def test_repeated_kills_under_provider_faults(tmp_path: Path) -> None:
    """Three kills during one run whose provider also fails 15 % of the time."""
    records = 400
    faults = {"faults": [{"rate": 0.15, "behaviour": {"kind": "status", "status": 503}}]}
    async with rig(tmp_path, max_concurrency=CONCURRENCY, fake_config=faults) as the_rig:
        address = await the_rig.start()
        async with the_rig.client(address) as client:
            await client.upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=classification_records(records),
            )
            run = await client.create_run(
                models=["fake"],
                datasets=[("reviews", "1.0.0")],
                retry_policy=RetryPolicy(max_retries=10, backoff_s=(0.05,), jitter_fraction=0.0),
            )
        crashes = []
        for target in (80, 180, 280):

            async def answered(target: int = target) -> bool:
                return await _ok_answers(the_rig) >= target

            await wait_for(answered, timeout_s=60)
            crashes.append(await the_rig.kill())
            await the_rig.start()
        final = await the_rig.finish(run.run_id)
        assert final.state.value == "succeeded"
        the_rig.assert_complete(run.run_id, records)
        await the_rig.assert_no_finished_work_repeated(*crashes)
        for crash in crashes:
            await the_rig.assert_orphans_exit(crash)
