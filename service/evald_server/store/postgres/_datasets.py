"""Datasets on PostgreSQL: immutable once written, records stored one row each
(``COPY``), shared by every replica."""

from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

from evald_server.domain import TaskType
from evald_server.store._records import DatasetRow, RecordRow
from evald_server.store._rows import (
    DATASET_COLUMNS,
    RECORD_COLUMNS,
    dataset_from,
    dataset_values,
    record_from,
    record_values,
)


async def create_dataset(
    conn: asyncpg.Connection, dataset: DatasetRow, records: Iterable[RecordRow]
) -> tuple[DatasetRow, bool]:
    """Insert the dataset and its records (``COPY``) unless (tenant, name, version) or
    (tenant, request_id) exists; concurrent uploads of one name are ordered by an
    advisory lock, so the second finds the first."""
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1))", f"dataset:{dataset.tenant}"
        )
        existing = await _find_existing(conn, dataset)
        if existing is not None:
            return existing, False
        await conn.execute(
            f"INSERT INTO datasets ({DATASET_COLUMNS}) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            *dataset_values(dataset),
        )
        await conn.copy_records_to_table(  # streamed: an upload is never whole in memory
            "dataset_records",
            records=record_values(dataset.dataset_id, records),
            columns=RECORD_COLUMNS,
        )
    return dataset, True


async def _find_existing(conn: asyncpg.Connection, dataset: DatasetRow) -> DatasetRow | None:
    if dataset.request_id is not None:
        row = await conn.fetchrow(
            f"SELECT {DATASET_COLUMNS} FROM datasets WHERE tenant = $1 AND request_id = $2",
            dataset.tenant,
            dataset.request_id,
        )
        if row is not None:
            return dataset_from(row)
    return await find_dataset(conn, dataset.tenant, dataset.name, dataset.benchmark_version)


async def find_dataset(
    conn: asyncpg.Connection, tenant: str, name: str, version: str
) -> DatasetRow | None:
    row = await conn.fetchrow(
        f"SELECT {DATASET_COLUMNS} FROM datasets "
        "WHERE tenant = $1 AND name = $2 AND benchmark_version = $3",
        tenant,
        name,
        version,
    )
    return None if row is None else dataset_from(row)


async def get_dataset(conn: asyncpg.Connection, dataset_id: str) -> DatasetRow | None:
    row = await conn.fetchrow(
        f"SELECT {DATASET_COLUMNS} FROM datasets WHERE dataset_id = $1", dataset_id
    )
    return None if row is None else dataset_from(row)


async def list_datasets(
    conn: asyncpg.Connection,
    tenant: str,
    name: str | None,
    task_type: TaskType | None,
    after: tuple[float, str] | None,
    limit: int,
) -> list[DatasetRow]:
    """Newest first, keyset-paginated on (created_at, dataset_id)."""
    sql = f"SELECT {DATASET_COLUMNS} FROM datasets WHERE tenant = $1"
    params: list[Any] = [tenant]
    if name:
        params.append(name)
        sql += f" AND name = ${len(params)}"
    if task_type is not None:
        params.append(task_type.value)
        sql += f" AND task_type = ${len(params)}"
    if after is not None:
        params.extend(after)
        sql += f" AND (created_at, dataset_id) < (${len(params) - 1}, ${len(params)})"
    params.append(limit)
    sql += f" ORDER BY created_at DESC, dataset_id DESC LIMIT ${len(params)}"
    return [dataset_from(row) for row in await conn.fetch(sql, *params)]


async def read_records(
    conn: asyncpg.Connection, dataset_id: str, idxs: Sequence[int]
) -> list[RecordRow]:
    rows = await conn.fetch(
        "SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = $1 "
        "AND idx = ANY($2::int[]) ORDER BY idx",
        dataset_id,
        list(idxs),
    )
    return [record_from(r) for r in rows]
