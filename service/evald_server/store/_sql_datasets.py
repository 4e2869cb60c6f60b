"""Datasets in SQL: immutable once written, records stored one row each."""

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from evald_server.domain import TaskType
from evald_server.store._records import DatasetRow, RecordRow
from evald_server.store._sql_common import dumps, transaction

_COLUMNS = (
    "dataset_id, tenant, name, benchmark_version, task_type, sha256, record_count, "
    "prompt_template, created_at, request_id, request_hash, size_bytes, prompt_options"
)


def _dataset_from(row: tuple[Any, ...]) -> DatasetRow:
    return DatasetRow(
        dataset_id=row[0],
        tenant=row[1],
        name=row[2],
        benchmark_version=row[3],
        task_type=TaskType(row[4]),
        content_sha256=row[5],
        record_count=int(row[6]),
        prompt_template=row[7],
        created_at=row[8],
        request_id=row[9],
        request_hash=row[10],
        size_bytes=int(row[11]),
        prompt_options=None if row[12] is None else json.loads(row[12]),
    )


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
            f"INSERT INTO datasets ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                dataset.dataset_id,
                dataset.tenant,
                dataset.name,
                dataset.benchmark_version,
                dataset.task_type.value,
                dataset.content_sha256,
                dataset.record_count,
                dataset.prompt_template,
                dataset.created_at,
                dataset.request_id,
                dataset.request_hash,
                dataset.size_bytes,
                None if dataset.prompt_options is None else dumps(dataset.prompt_options),
            ),
        )
        conn.executemany(
            "INSERT INTO dataset_records (dataset_id, idx, record_id, fields) VALUES (?, ?, ?, ?)",
            _record_rows(dataset.dataset_id, records),
        )
    return dataset, True


def _record_rows(
    dataset_id: str, records: Iterable[RecordRow]
) -> Iterator[tuple[str, int, str, str]]:
    for record in records:
        yield (dataset_id, record.idx, record.record_id, dumps(record.fields))


def _find_existing(conn: sqlite3.Connection, dataset: DatasetRow) -> DatasetRow | None:
    if dataset.request_id is not None:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM datasets WHERE tenant = ? AND request_id = ?",
            (dataset.tenant, dataset.request_id),
        ).fetchone()
        if row is not None:
            return _dataset_from(row)
    return find_dataset(conn, dataset.tenant, dataset.name, dataset.benchmark_version)


def find_dataset(
    conn: sqlite3.Connection, tenant: str, name: str, version: str
) -> DatasetRow | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM datasets WHERE tenant = ? AND name = ? AND benchmark_version = ?",
        (tenant, name, version),
    ).fetchone()
    return None if row is None else _dataset_from(row)


def get_dataset(conn: sqlite3.Connection, dataset_id: str) -> DatasetRow | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM datasets WHERE dataset_id = ?", (dataset_id,)
    ).fetchone()
    return None if row is None else _dataset_from(row)


def list_datasets(
    conn: sqlite3.Connection,
    tenant: str,
    name: str | None,
    task_type: TaskType | None,
    after: tuple[float, str] | None,
    limit: int,
) -> list[DatasetRow]:
    """Newest first, keyset-paginated on (created_at, dataset_id)."""
    sql = f"SELECT {_COLUMNS} FROM datasets WHERE tenant = ?"
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
    return [_dataset_from(row) for row in conn.execute(sql, params).fetchall()]


def read_records(conn: sqlite3.Connection, dataset_id: str, idxs: Sequence[int]) -> list[RecordRow]:
    placeholders = ",".join("?" * len(idxs))
    rows = conn.execute(
        f"SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = ? "
        f"AND idx IN ({placeholders}) ORDER BY idx",
        (dataset_id, *idxs),
    ).fetchall()
    return [RecordRow(idx=r[0], record_id=r[1], fields=json.loads(r[2])) for r in rows]
