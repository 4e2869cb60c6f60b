"""The UploadDataset stream: byte chunks from a file or from records, and the call."""

import asyncio
import io
import json
import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import IO, Any

import anyio
import grpc

from evald.v1 import dataset_pb2, service_pb2
from evald_client._errors import EvaldError, error_from_rpc, error_from_status

_CORE_WRITE_ERROR = "Internal error from Core"
_SETTLE_POLLS = 50  # x 20 ms: how long to wait for the server's own status
_SPOOL_IN_MEMORY_BYTES = 8 * 1024 * 1024


async def chunks_from_path(path: Path, chunk_bytes: int) -> AsyncIterator[bytes]:
    """The file's bytes as they are, ``chunk_bytes`` at a time (never all in memory)."""
    async with await anyio.open_file(path, "rb") as handle:
        while chunk := await handle.read(chunk_bytes):
            yield chunk


def spool_records(records: Iterable[Mapping[str, Any]]) -> IO[bytes]:
    """Records as JSONL, one per line, in a temporary file (in memory up to 8 MiB).

    Every record is serialised before the upload starts, so that a record that is not
    a JSON object raises ``TypeError`` (naming its index) before a byte is sent: a
    grpc.aio server can read a client's cancel mid-stream as a clean end of the upload.
    """
    spool = tempfile.SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY_BYTES)  # noqa: SIM115 (chunks_from_spool closes it)
    try:
        for index, record in enumerate(records):
            if not isinstance(record, Mapping):
                raise TypeError(f"records[{index}] is a {type(record).__name__}, not a mapping")
            try:
                line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
            except (TypeError, ValueError) as exc:
                raise TypeError(f"records[{index}] is not JSON-serialisable: {exc}") from exc
            spool.write(line.encode("utf-8") + b"\n")
    except BaseException:
        spool.close()
        raise
    spool.seek(0)
    return spool


def spool_size(spool: IO[bytes]) -> int:
    """The spooled byte count; leaves the spool positioned at its start."""
    size = spool.seek(0, io.SEEK_END)
    spool.seek(0)
    return size


async def chunks_from_spool(spool: IO[bytes], chunk_bytes: int) -> AsyncIterator[bytes]:
    """The spooled bytes, ``chunk_bytes`` at a time; closes the spool when done."""
    try:
        while chunk := spool.read(chunk_bytes):
            yield chunk
    finally:
        spool.close()


async def send_upload(
    call: Any, header: dataset_pb2.UploadDatasetHeader, chunks: AsyncIterator[bytes]
) -> service_pb2.UploadDatasetResponse:
    """Write the header and every chunk to the started UploadDataset ``call``; return
    the server's answer or raise the SDK error. Anything else raised (a bad record)
    cancels the call, so nothing is stored."""
    try:
        try:
            await call.write(service_pb2.UploadDatasetRequest(header=header))
            async for chunk in chunks:
                await call.write(service_pb2.UploadDatasetRequest(chunk=chunk))
            await call.done_writing()
        except asyncio.InvalidStateError:
            pass  # the server answered early (a rejection): awaiting the call says why
        response: service_pb2.UploadDatasetResponse = await call
        return response
    except grpc.RpcError as exc:
        raise await _settled_error(call, exc) from exc
    except BaseException:
        call.cancel()
        raise


async def _settled_error(call: Any, exc: grpc.RpcError) -> EvaldError:
    """The server's status for a failed upload.

    When the server rejects an upload while chunks are still being written, grpc.aio
    fails the pending write as INTERNAL "Internal error from Core" and records the
    server's real status (e.g. DATASET_INVALID naming the line) on the call a moment
    later. Wait for it, within a bound, rather than report a bogus INTERNAL.
    """
    error = error_from_rpc(exc)
    if error.code != "INTERNAL" or error.message != _CORE_WRITE_ERROR:
        return error
    for _ in range(_SETTLE_POLLS):
        await anyio.sleep(0.02)
        code = await call.code()
        details = await call.details()
        if code != grpc.StatusCode.INTERNAL or details != _CORE_WRITE_ERROR:
            return error_from_status(code.name, details or "", await call.trailing_metadata())
    return error
