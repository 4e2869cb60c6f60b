"""Datasets: upload (validated, all or nothing, idempotent), get and list.

A version is immutable: uploading the same name + benchmark_version again with the same
content (and task type and prompt template) returns the existing dataset; with other
content it is ALREADY_EXISTS (DATASET_VERSION_CONFLICT). A ``request_id`` reused with a
different upload is ALREADY_EXISTS (REQUEST_ID_CONFLICT).
"""

import functools
import hashlib
import json
import re
import time
import uuid
from collections.abc import AsyncIterable, Iterable

import anyio

from evald_server.app._pages import keyset, page_query
from evald_server.app._types import Dataset, DatasetHeader, Page
from evald_server.config import LimitsSection
from evald_server.datasets import ParsedDataset, parse_jsonl, validate_template
from evald_server.domain import (
    AlreadyExists,
    DatasetInvalid,
    ErrorReason,
    FieldViolation,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    TaskType,
)
from evald_server.engine import DatasetRef, ShotSourceProblem, shot_source
from evald_server.store import DatasetRow, RecordRow, Store

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# Semantic Versioning 2.0.0 (the regex semver.org recommends).
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_MAX_REQUEST_ID = 128


def _header_problems(header: DatasetHeader) -> list[FieldViolation]:
    problems = []
    if not _NAME.match(header.name):
        problems.append(
            FieldViolation("name", "1-128 of letters, digits, '.', '_', '-', starting alphanumeric")
        )
    if not _SEMVER.match(header.benchmark_version):
        problems.append(
            FieldViolation("benchmark_version", "must be a semantic version, e.g. 1.0.0")
        )
    if not isinstance(header.task_type, TaskType):
        problems.append(FieldViolation("task_type", "is required"))
    if header.request_id is not None and not 0 < len(header.request_id) <= _MAX_REQUEST_ID:
        problems.append(FieldViolation("request_id", f"1-{_MAX_REQUEST_ID} characters"))
    if header.prompt is not None:
        problems.extend(FieldViolation(f, w) for f, w in header.prompt.problems("prompt"))
    return problems


class DatasetService:
    def __init__(self, store: Store, limits: LimitsSection, *, max_upload_bytes: int) -> None:
        self._store = store
        self._limits = limits
        # The whole upload is held while it is validated; this bounds that memory.
        self._max_upload_bytes = max_upload_bytes

    async def upload(
        self, tenant: str, header: DatasetHeader, chunks: AsyncIterable[bytes] | Iterable[bytes]
    ) -> tuple[Dataset, bool]:
        """Store a new version (``True``) or return the identical existing one (``False``)."""
        problems = _header_problems(header)
        if problems:
            raise DatasetInvalid(
                ErrorReason.DATASET_HEADER_INVALID,
                "invalid dataset header: "
                + "; ".join(f"{p.field}: {p.description}" for p in problems),
                field_violations=tuple(problems),
            )
        if header.prompt_template is not None:
            validate_template(header.task_type, header.prompt_template)
        received = await _collect(chunks, self._max_upload_bytes)
        size = sum(len(c) for c in received)
        # Validation is CPU work (pydantic per record): off the event loop.
        parse = functools.partial(
            parse_jsonl,
            header.task_type,
            received,
            max_records=self._limits.max_records_per_dataset,
            max_record_bytes=self._limits.max_record_bytes,
        )
        parsed: ParsedDataset = await anyio.to_thread.run_sync(parse)
        del received
        if header.prompt is not None:
            await self._check_shot_source(tenant, header, len(parsed.records))
        request_hash = _upload_hash(header, parsed.content_sha256)
        row = DatasetRow(
            dataset_id=f"ds_{uuid.uuid4().hex[:16]}",
            tenant=tenant,
            name=header.name,
            benchmark_version=header.benchmark_version,
            task_type=header.task_type,
            content_sha256=parsed.content_sha256,
            record_count=len(parsed.records),
            prompt_template=header.prompt_template,
            created_at=time.time(),
            request_id=header.request_id,
            request_hash=request_hash,
            size_bytes=size,
            prompt_options=None if header.prompt is None else header.prompt.to_json(),
        )
        records = (
            RecordRow(idx=i, record_id=r.record_id, fields=r.fields)
            for i, r in enumerate(parsed.records)
        )
        stored, created = await self._store.create_dataset(row, records)
        if created:
            return Dataset.of(stored), True
        if header.request_id is not None and stored.request_id == header.request_id:
            if stored.request_hash != request_hash:
                raise AlreadyExists(
                    ErrorReason.REQUEST_ID_CONFLICT,
                    f"request_id {header.request_id!r} was used for a different upload",
                    metadata={"requestId": header.request_id, "datasetId": stored.dataset_id},
                )
            return Dataset.of(stored), False
        same = (
            stored.content_sha256 == parsed.content_sha256
            and stored.task_type is header.task_type
            and stored.prompt_template == header.prompt_template
            and stored.prompt_options
            == (None if header.prompt is None else header.prompt.to_json())
        )
        if not same:
            raise AlreadyExists(
                ErrorReason.DATASET_VERSION_CONFLICT,
                f"dataset {header.name} {header.benchmark_version} exists with different "
                "content; versions are immutable, upload a new benchmark_version",
                metadata={
                    "name": header.name,
                    "benchmarkVersion": header.benchmark_version,
                    "existingSha256": stored.content_sha256,
                },
            )
        return Dataset.of(stored), False

    async def _check_shot_source(self, tenant: str, header: DatasetHeader, records: int) -> None:
        assert header.prompt is not None
        try:
            await shot_source(
                self._store,
                tenant,
                header.task_type,
                header.prompt,
                own_record_count=records,
                field="prompt",
            )
        except ShotSourceProblem as problem:
            raise DatasetInvalid(
                ErrorReason.DATASET_HEADER_INVALID,
                f"invalid dataset header: {problem.field}: {problem.message}",
                metadata={"field": problem.field},
                field_violations=(FieldViolation(problem.field, problem.message),),
            ) from problem

    async def get(
        self, tenant: str, dataset_id: str | None = None, ref: DatasetRef | None = None
    ) -> Dataset:
        if not dataset_id and ref is None:
            raise InvalidArgument(
                ErrorReason.INVALID_ARGUMENT,
                "give a dataset_id or a dataset ref (name and benchmark_version)",
                field_violations=(FieldViolation("dataset", "dataset_id or ref is required"),),
            )
        row = None
        if dataset_id:
            row = await self._store.get_dataset(dataset_id)
        elif ref is not None:
            row = await self._store.find_dataset(tenant, ref.name, ref.benchmark_version)
        if row is None or row.tenant != tenant:
            what = dataset_id or (f"{ref.name} {ref.benchmark_version}" if ref else "")
            raise NotFound(
                ErrorReason.DATASET_NOT_FOUND
                if dataset_id
                else ErrorReason.DATASET_VERSION_NOT_FOUND,
                f"dataset {what!r} not found",
            )
        return Dataset.of(row)

    async def list(
        self,
        tenant: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        name: str | None = None,
        task_type: TaskType | None = None,
    ) -> Page[Dataset]:
        filters = {"name": name or "", "task_type": task_type.value if task_type else ""}
        query = page_query(
            "datasets", tenant, filters, keyset, page_size=page_size, page_token=page_token
        )
        rows = await self._store.list_datasets(
            tenant, query.after, query.size + 1, name=name or None, task_type=task_type
        )
        page, next_token = query.cut(rows, lambda r: [r.created_at, r.dataset_id])
        return Page(tuple(Dataset.of(r) for r in page), next_token)


async def _collect(chunks: AsyncIterable[bytes] | Iterable[bytes], cap: int) -> list[bytes]:
    received: list[bytes] = []
    total = 0

    def keep(chunk: bytes) -> None:
        nonlocal total
        total += len(chunk)
        if total > cap:
            raise ResourceExhausted(
                ErrorReason.DATASET_TOO_LARGE,
                f"the upload exceeds {cap} bytes (engine.max_upload_bytes)",
                metadata={"limit": "max_upload_bytes", "limitValue": cap},
            )
        received.append(bytes(chunk))

    if isinstance(chunks, AsyncIterable):
        async for chunk in chunks:
            keep(chunk)
    else:
        for chunk in chunks:
            keep(chunk)
    return received


def _upload_hash(header: DatasetHeader, content_sha256: str) -> str:
    body: list[object] = [
        header.name,
        header.benchmark_version,
        header.task_type.value,
        header.prompt_template,
        content_sha256,
    ]
    if header.prompt is not None:  # appended only when set: older hashes stay valid
        body.append(header.prompt.to_json())
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()
