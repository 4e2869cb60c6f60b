"""An upload cut off mid-stream is never stored.

grpc.aio reports a client that is cancelled or killed mid-upload to the server as a
clean end of the stream, and cancels the handler only moments later: whether a
truncated dataset has been stored by then is a race. The header's ``content_length``
closes it: fewer bytes than announced fail before anything is stored.
"""

import asyncio
import json
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from evald.v1 import dataset_pb2, enums_pb2, service_pb2, service_pb2_grpc
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

LINES = [
    (json.dumps({"id": f"r{i}", "question": f"q{i}?", "answers": ["a"]}) + "\n").encode()
    for i in range(20)
]


def header(content_length: int) -> service_pb2.UploadDatasetRequest:
    return service_pb2.UploadDatasetRequest(
        header=dataset_pb2.UploadDatasetHeader(
            name="framed",
            benchmark_version="1.0.0",
            task_type=enums_pb2.TASK_TYPE_QA,
            content_length=content_length,
        )
    )


async def stored(stub: service_pb2_grpc.EvaluationServiceStub) -> list[str]:
    response = await stub.ListDatasets(service_pb2.ListDatasetsRequest())
    return [d.name for d in response.datasets]


async def test_fewer_bytes_than_announced_fail_and_store_nothing(tmp_path: Path) -> None:
    async with (
        running_server(make_config(tmp_path)) as address,
        grpc.aio.insecure_channel(address) as channel,
    ):
        stub = service_pb2_grpc.EvaluationServiceStub(channel)
        total = sum(len(line) for line in LINES)

        async def requests():  # type: ignore[no-untyped-def]
            yield header(total)
            for line in LINES[:10]:  # whole lines: valid JSONL, only shorter
                yield service_pb2.UploadDatasetRequest(chunk=line)

        call = stub.UploadDataset(requests())
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        status = await rpc_status.aio.from_call(call)
        assert status is not None
        info = error_details_pb2.ErrorInfo()
        assert status.details[0].Unpack(info)
        assert info.reason == "DATASET_UPLOAD_INCOMPLETE"
        received = str(sum(len(line) for line in LINES[:10]))
        assert dict(info.metadata) == {"expectedBytes": str(total), "receivedBytes": received}
        assert await stored(stub) == []


async def test_a_client_cut_off_mid_upload_leaves_nothing_stored(tmp_path: Path) -> None:
    async with running_server(make_config(tmp_path)) as address:
        sent_half = asyncio.Event()

        async def requests():  # type: ignore[no-untyped-def]
            yield header(sum(len(line) for line in LINES))
            for line in LINES[:10]:
                yield service_pb2.UploadDatasetRequest(chunk=line)
            sent_half.set()
            await asyncio.sleep(30)  # the rest never comes: the client is cut off

        # The client dies mid-upload: its channel goes away with the call still open.
        dying = grpc.aio.insecure_channel(address)
        call = service_pb2_grpc.EvaluationServiceStub(dying).UploadDataset(requests())
        await asyncio.wait_for(sent_half.wait(), 10)
        await asyncio.sleep(0.2)  # let the server read what was sent
        await dying.close()
        with pytest.raises((asyncio.CancelledError, grpc.aio.AioRpcError)):
            await call

        async with grpc.aio.insecure_channel(address) as channel:
            stub = service_pb2_grpc.EvaluationServiceStub(channel)
            await asyncio.sleep(0.5)  # whatever the server does with the stream, it has done
            assert await stored(stub) == []

            # A complete upload with the same name and version is then accepted.
            async def complete():  # type: ignore[no-untyped-def]
                yield header(sum(len(line) for line in LINES))
                for line in LINES:
                    yield service_pb2.UploadDatasetRequest(chunk=line)

            response = await stub.UploadDataset(complete())
            assert response.dataset.record_count == len(LINES)
            assert await stored(stub) == ["framed"]
