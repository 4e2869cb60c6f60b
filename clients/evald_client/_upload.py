"""The byte chunks of an UploadDataset stream, from a file or from records."""

import json
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio


async def chunks_from_path(path: Path, chunk_bytes: int) -> AsyncIterator[bytes]:
    """The file's bytes as they are, ``chunk_bytes`` at a time (never all in memory)."""
    async with await anyio.open_file(path, "rb") as handle:
        while chunk := await handle.read(chunk_bytes):
            yield chunk


async def chunks_from_records(
    records: Iterable[Mapping[str, Any]], chunk_bytes: int
) -> AsyncIterator[bytes]:
    """Records as JSONL, one per line, cut into chunks of about ``chunk_bytes``.

    A record that is not a JSON object raises ``TypeError`` naming its index; the caller
    cancels the upload, so nothing is stored.
    """
    buffer = bytearray()
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise TypeError(f"records[{index}] is a {type(record).__name__}, not a mapping")
        try:
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"records[{index}] is not JSON-serialisable: {exc}") from exc
        buffer += line.encode("utf-8") + b"\n"
        while len(buffer) >= chunk_bytes:
            yield bytes(buffer[:chunk_bytes])
            del buffer[:chunk_bytes]
    if buffer:
        yield bytes(buffer)
