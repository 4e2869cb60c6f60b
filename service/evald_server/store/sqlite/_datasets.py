"""Datasets on SQLite: immutable once written, records stored one row each."""

import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any

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
from evald_server.store.sqlite._common import marks, transaction


def create_dataset(
    conn: sqlite3.Connection, dataset: DatasetRow, records: Iterable[RecordRow]
) -> tuple[DatasetRow, bool]:
    """Insert the dataset and its records, unless (tenant, name, version) or (tenant,
    request_id) exists: then nothing is written and the existing one is returned with
    ``False`` (the caller decides whether that is the same upload or a conflict)."""
    with transaction(conn):
        existing = _find_existing(conn, dataset)
        if existing is not None:
            return existing, False
        conn.execute(
            f"INSERT INTO datasets ({DATASET_COLUMNS}) VALUES ({marks(13)})",
            dataset_values(dataset),
        )
        conn.executemany(  # streamed: an upload is never whole in memory
            f"INSERT INTO dataset_records ({', '.join(RECORD_COLUMNS)}) "
            f"VALUES ({marks(len(RECORD_COLUMNS))})",
            record_values(dataset.dataset_id, records),
        )
    return dataset, True


def _find_existing(conn: sqlite3.Connection, dataset: DatasetRow) -> DatasetRow | None:
    if dataset.request_id is not None:
        row = conn.execute(
            f"SELECT {DATASET_COLUMNS} FROM datasets WHERE tenant = ? AND request_id = ?",
            (dataset.tenant, dataset.request_id),
        ).fetchone()
        if row is not None:
            return dataset_from(row)
    return find_dataset(conn, dataset.tenant, dataset.name, dataset.benchmark_version)


def find_dataset(
    conn: sqlite3.Connection, tenant: str, name: str, version: str
) -> DatasetRow | None:
    row = conn.execute(
        f"SELECT {DATASET_COLUMNS} FROM datasets "
        "WHERE tenant = ? AND name = ? AND benchmark_version = ?",
        (tenant, name, version),
    ).fetchone()
    return None if row is None else dataset_from(row)


def get_dataset(conn: sqlite3.Connection, dataset_id: str) -> DatasetRow | None:
    row = conn.execute(
        f"SELECT {DATASET_COLUMNS} FROM datasets WHERE dataset_id = ?", (dataset_id,)
    ).fetchone()
    return None if row is None else dataset_from(row)


def list_datasets(
    conn: sqlite3.Connection,
    tenant: str,
    name: str | None,
    task_type: TaskType | None,
    after: tuple[float, str] | None,
    limit: int,
) -> list[DatasetRow]:
    """Newest first, keyset-paginated on (created_at, dataset_id)."""
    sql = f"SELECT {DATASET_COLUMNS} FROM datasets WHERE tenant = ?"
    params: list[Any] = [tenant]
    if name:
        sql += " AND name = ?"
        params.append(name)
    if task_type is not None:
        sql += " AND task_type = ?"
        params.append(task_type.value)
    if after is not None:
        sql += " AND (created_at, dataset_id) < (?, ?)"
        params.extend(after)
    sql += " ORDER BY created_at DESC, dataset_id DESC LIMIT ?"
    params.append(limit)
    return [dataset_from(row) for row in conn.execute(sql, params).fetchall()]


def read_records(conn: sqlite3.Connection, dataset_id: str, idxs: Sequence[int]) -> list[RecordRow]:
    rows = conn.execute(
        "SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = ? "
        f"AND idx IN ({marks(len(idxs))}) ORDER BY idx",
        (dataset_id, *idxs),
    ).fetchall()
    return [record_from(r) for r in rows]
