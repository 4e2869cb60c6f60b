"""An unexpected exception inside a handler is answered INTERNAL with ErrorInfo
INTERNAL_ERROR and nothing else: no traceback, no exception text; the traceback goes
to the server's log. Provoked with rows corrupted in the real SQLite file, which the
store reads back as it finds them (a bug or a damaged store is the same to a client)."""

import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from evald.v1 import service_pb2
from evald_client import AsyncEvaldClient, InternalError, RunState
from tests._shared import classification_records, simulated_model
from tests.api._support import RpcFailure, assert_reason, fails, raw_stub, stream_fails
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

# Strings of the exceptions provoked below, none of which may reach a client.
LEAKS = ("Traceback", "KeyError", "ValueError", "TypeError", "JSONDecodeError", "bogus", ".py")


@dataclass(frozen=True)
class Damaged:
    address: str
    store: Path
    run_id: str
    dataset_id: str


@pytest.fixture(scope="module")
async def damaged(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Damaged]:
    """A server with one finished run; the tests corrupt its rows one by one."""
    directory = tmp_path_factory.mktemp("internal")
    config = make_config(directory, models=[simulated_model("sim-a")])
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        dataset = await client.upload_dataset(
            name="fine",
            version="1.0.0",
            task_type="classification",
            records=classification_records(6, prefix="c"),
        )
        run = await client.create_run(models=["sim-a"], datasets=[("fine", "1.0.0")])
        assert (await client.wait(run.run_id, timeout_s=30)).state is RunState.SUCCEEDED
        yield Damaged(address, directory / "evald.sqlite3", run.run_id, dataset.dataset_id)


@contextmanager
def corrupted(store: Path, sql: str, *params: object) -> Iterator[None]:
    """Apply a damaging UPDATE for the duration of the block, then undo it."""
    connection = sqlite3.connect(store, isolation_level=None, timeout=30)
    try:
        table = sql.split()[1]
        before = connection.execute(f"SELECT * FROM {table}").fetchall()
        assert connection.execute(sql, params).rowcount == 1
        yield
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(f"DELETE FROM {table}")
        marks = ", ".join("?" * len(before[0]))
        connection.executemany(f"INSERT INTO {table} VALUES ({marks})", before)
        connection.execute("COMMIT")
    finally:
        connection.close()


def assert_internal(failure: RpcFailure) -> None:
    assert_reason(failure, grpc.StatusCode.INTERNAL, "INTERNAL_ERROR")
    assert failure.metadata == {}
    assert failure.detail_types == ("google.rpc.ErrorInfo",)
    assert failure.message
    for leak in LEAKS:
        assert leak not in failure.message, failure.message


def logged_traceback(caplog: pytest.LogCaptureFixture, method: str, exception: str) -> None:
    records = [
        r
        for r in caplog.records
        if r.name == "evald.api" and r.levelno == logging.ERROR and method in r.getMessage()
    ]
    assert records, f"no error logged for {method}"
    exc_info = records[-1].exc_info
    assert exc_info is not None
    assert exc_info[0] is not None
    assert exc_info[0].__name__ == exception
    assert "Traceback" in caplog.text


async def test_unary_handler_bug_is_internal_and_logged(
    damaged: Damaged, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="evald.api")
    sql = "UPDATE runs SET spec = '{\"bogus\": 1}' WHERE run_id = ?"
    async with raw_stub(damaged.address) as stub:
        with corrupted(damaged.store, sql, damaged.run_id):
            failure = await fails(stub.GetRun(service_pb2.GetRunRequest(run_id=damaged.run_id)))
            assert_internal(failure)
            logged_traceback(caplog, "GetRun", "KeyError")
            # The SDK raises its InternalError, with nothing more to tell.
            async with AsyncEvaldClient(damaged.address) as client:
                with pytest.raises(InternalError) as info:
                    await client.get_run(damaged.run_id)
            assert (info.value.code, info.value.reason) == ("INTERNAL", "INTERNAL_ERROR")
            # Other calls are unaffected.
            listed = await stub.ListDatasets(service_pb2.ListDatasetsRequest())
            assert [d.dataset_id for d in listed.datasets] == [damaged.dataset_id]
        # Repaired, the same call works again.
        run = await stub.GetRun(service_pb2.GetRunRequest(run_id=damaged.run_id))
        assert run.run.run_id == damaged.run_id


async def test_damaged_dataset_row_is_internal(
    damaged: Damaged, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="evald.api")
    sql = "UPDATE datasets SET task_type = 'bogus' WHERE dataset_id = ?"
    async with raw_stub(damaged.address) as stub:
        with corrupted(damaged.store, sql, damaged.dataset_id):
            request = service_pb2.GetDatasetRequest(dataset_id=damaged.dataset_id)
            assert_internal(await fails(stub.GetDataset(request)))
            logged_traceback(caplog, "GetDataset", "ValueError")
        response = await stub.GetDataset(
            service_pb2.GetDatasetRequest(dataset_id=damaged.dataset_id)
        )
        assert response.dataset.name == "fine"


async def test_streaming_handler_bug_ends_the_stream_internal(
    damaged: Damaged, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="evald.api")
    sql = "UPDATE events SET payload = '[]' WHERE run_id = ? AND seq = 3"
    async with raw_stub(damaged.address) as stub:
        request = service_pb2.WatchRunRequest(run_id=damaged.run_id)
        with corrupted(damaged.store, sql, damaged.run_id):
            received, failure = await stream_fails(stub.WatchRun(request))
            assert [r.event.seq for r in received] == [1, 2], "sent until the damaged event"
            assert_internal(failure)
            logged_traceback(caplog, "WatchRun", "TypeError")
        replay = stub.WatchRun(request)
        assert [r.event.seq async for r in replay][:3] == [1, 2, 3]
        assert await replay.code() is grpc.StatusCode.OK
