"""Replicas starting together on a fresh PostgreSQL database migrate it once: every
start succeeds, and the schema is at the latest version with one version row."""

import anyio
import asyncpg
import pytest

from evald_server.store import StoreError
from evald_server.store.postgres import LATEST_VERSION, PostgresStore
from tests._postgres import new_database, pg_url

__all__ = ["pg_url"]

pytestmark = pytest.mark.anyio

# 50 starts: DATABASES fresh databases, each opened by REPLICAS stores at once (one
# database at a time: REPLICAS × 2 connections, well inside max_connections).
DATABASES = 5
REPLICAS = 10


async def _start_together(url: str) -> list[str]:
    """Open REPLICAS stores on ``url`` at once; the errors of those that failed."""
    errors: list[str] = []
    opened: list[PostgresStore] = []

    async def start(index: int) -> None:
        try:
            opened.append(await PostgresStore.open(url, pool_size=1, replica_id=f"r{index}"))
        except StoreError as exc:
            errors.append(str(exc))

    try:
        async with anyio.create_task_group() as starts:
            for index in range(REPLICAS):
                starts.start_soon(start, index)
    finally:
        for store in opened:
            await store.close()
    return errors


async def test_replicas_starting_together_on_a_fresh_database_migrate_it_once(
    pg_url: str,
) -> None:
    for attempt in range(DATABASES):
        async with new_database(pg_url, f"fresh{attempt}") as url:
            assert await _start_together(url) == [], f"database {attempt}"
            conn = await asyncpg.connect(url, timeout=5)
            try:
                versions = await conn.fetch("SELECT version FROM schema_version")
            finally:
                await conn.close()
            assert [v[0] for v in versions] == [LATEST_VERSION]
