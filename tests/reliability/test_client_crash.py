"""The client dies mid-upload (cancelled call, a request iterator that raises, a client
process killed with SIGKILL): the server stores nothing of the half-sent dataset, and
the same name and version upload whole afterwards."""

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import grpc
import pytest

from evald.v1 import dataset_pb2, enums_pb2, service_pb2, service_pb2_grpc
from evald_client import AsyncEvaldClient
from tests._shared import classification_records, jsonl
from tests.harness import make_config, running_server
from tests.reliability._support import db_path, query

pytestmark = pytest.mark.anyio

RECORDS = 2000
BODY = jsonl(classification_records(RECORDS))
# Half the body, cut at a line end: what arrived is valid JSONL on its own.
HALF = BODY[: BODY.index(b"\n", len(BODY) // 2) + 1]
HEADER = dataset_pb2.UploadDatasetHeader(
    name="reviews", benchmark_version="1.0.0", task_type=enums_pb2.TASK_TYPE_CLASSIFICATION
)

CLIENT = """
import sys, time
import grpc
from evald.v1 import dataset_pb2, enums_pb2, service_pb2, service_pb2_grpc
header = dataset_pb2.UploadDatasetHeader.FromString(bytes.fromhex(sys.argv[2]))
half = sys.stdin.buffer.read()
def requests():
    yield service_pb2.UploadDatasetRequest(header=header)
    for start in range(0, len(half), 4096):
        yield service_pb2.UploadDatasetRequest(chunk=half[start : start + 4096])
    print("SENT", flush=True)
    time.sleep(600)
stub = service_pb2_grpc.EvaluationServiceStub(grpc.insecure_channel(sys.argv[1]))
stub.UploadDataset(requests())
"""


async def _half_upload(address: str, *, how: str) -> None:
    sent = anyio.Event()

    async def requests() -> AsyncIterator[service_pb2.UploadDatasetRequest]:
        yield service_pb2.UploadDatasetRequest(header=HEADER)
        for start in range(0, len(HALF), 4096):
            yield service_pb2.UploadDatasetRequest(chunk=HALF[start : start + 4096])
        sent.set()
        if how == "raise":
            raise RuntimeError("the client's record source failed mid-upload")
        await anyio.sleep(60)

    async with grpc.aio.insecure_channel(address) as channel:
        stub = service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
        call = stub.UploadDataset(requests(), timeout=60)
        with anyio.fail_after(30):
            await sent.wait()
        await anyio.sleep(0.3)  # let the chunks reach the server (sequencing only)
        if how == "cancel":
            call.cancel()
        with pytest.raises((grpc.aio.AioRpcError, anyio.get_cancelled_exc_class())):
            await call


async def _killed_client_process(address: str) -> None:
    process = await anyio.open_process(
        [sys.executable, "-c", CLIENT, address, HEADER.SerializeToString().hex()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdin is not None
        assert process.stdout is not None
        await process.stdin.send(HALF)
        await process.stdin.aclose()
        with anyio.fail_after(30):
            assert (await process.stdout.receive()).startswith(b"SENT")
        await anyio.sleep(0.3)
    finally:
        process.kill()  # SIGKILL: the client's connection just dies
        await process.wait()
        await process.aclose()


@pytest.mark.parametrize("how", ["cancel", "raise", "sigkill"])
async def test_client_dying_mid_upload_stores_nothing(tmp_path: Path, how: str) -> None:
    async with running_server(make_config(tmp_path)) as address:
        if how == "sigkill":
            await _killed_client_process(address)
        else:
            await _half_upload(address, how=how)
        await anyio.sleep(0.5)  # time for a (wrong) late store to land before we look
        assert query(db_path(tmp_path), "SELECT COUNT(*) FROM datasets") == [(0,)]
        assert query(db_path(tmp_path), "SELECT COUNT(*) FROM dataset_records") == [(0,)]
        async with AsyncEvaldClient(address) as client:
            dataset = await client.upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=[json.loads(line) for line in BODY.splitlines()],
            )
        assert dataset.record_count == RECORDS
