"""The two dialects keep one schema: after migrating a fresh SQLite file and a fresh
PostgreSQL database, the same tables with the same column names (column types may
differ by dialect). What only several replicas need is listed here, on purpose."""

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from evald_server.store import sqlite as sqlite_dialect
from evald_server.store.postgres import migrate as migrate_postgres
from tests._postgres import new_database, pg_url

__all__ = ["pg_url"]

Schema = dict[str, set[str]]  # table → column names

# Tables and columns only PostgreSQL has, and why.
ONLY_POSTGRES: Schema = {
    "replicas": {  # membership: who is alive, and the leases on what it holds
        "replica_id",
        "owner",
        "started_at",
        "heartbeat_at",
        "lease_until",
        "capacity",
    },
    "tasks": {
        "row_id",  # the order tasks wait for scoring in (SQLite's implicit rowid)
        "scorer",  # the replica holding the task's scoring job
    },
    "subtasks": {
        "claim_token",  # finds a claim whose commit's answer was lost (a retried claim)
        "lease_until",  # since version 1, never written: a lease is its owner's row
    },
}
ONLY_SQLITE: Schema = {}


def _sqlite_schema(path: Path) -> Schema:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        sqlite_dialect.migrate(conn)
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {t: {row[1] for row in conn.execute(f"PRAGMA table_info({t})")} for t in tables}
    finally:
        conn.close()


async def _postgres_schema(url: str) -> Schema:
    conn = await asyncpg.connect(url, timeout=5)
    try:
        await migrate_postgres(conn)
        rows = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema()"
        )
    finally:
        await conn.close()
    schema: Schema = {}
    for table, column in rows:
        schema.setdefault(table, set()).add(column)
    return schema


def _differences(lite: Schema, postgres: Schema) -> dict[str, tuple[set[str], set[str]]]:
    """Table → (columns only SQLite has, columns only PostgreSQL has), beyond the lists
    above; a table one side lacks has all its columns on the other side."""
    found = {}
    for table in sorted(set(lite) | set(postgres)):
        only_lite = lite.get(table, set()) - postgres.get(table, set())
        only_postgres = postgres.get(table, set()) - lite.get(table, set())
        only_lite -= ONLY_SQLITE.get(table, set())
        only_postgres -= ONLY_POSTGRES.get(table, set())
        if only_lite or only_postgres:
            found[table] = (only_lite, only_postgres)
    return found


@pytest.mark.anyio
async def test_both_dialects_migrate_to_the_same_tables_and_columns(
    tmp_path: Path, pg_url: str
) -> None:
    lite = _sqlite_schema(tmp_path / "parity.sqlite3")
    async with new_database(pg_url, "parity") as url:
        postgres = await _postgres_schema(url)
    # The allowed differences are real ones (a stale entry here would hide nothing).
    for table, columns in ONLY_POSTGRES.items():
        assert columns <= postgres.get(table, set()) - lite.get(table, set()), table
    for table, columns in ONLY_SQLITE.items():
        assert columns <= lite.get(table, set()) - postgres.get(table, set()), table
    assert _differences(lite, postgres) == {}
    assert "answer_flags" in lite["subtasks"]  # both at their latest versions
    assert "answer_flags" in postgres["subtasks"]
