"""Real PostgreSQL for tests: one database per test session, created and dropped here.

``EVALD_TEST_PG`` names the server (default: the local one, trust auth). Unreachable,
the PostgreSQL tests skip with the URL and the reason in the skip line (``pytest -ra``
lists it) — except under ``CI=true``, where a missing PostgreSQL fails them.
"""

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

ADMIN_URL = os.environ.get("EVALD_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))


def admin_sql(sql: str) -> None:
    """Run ``sql`` on the admin database, on a thread of its own (a session fixture may
    be set up from inside a running event loop)."""

    async def run() -> None:
        conn = await asyncpg.connect(ADMIN_URL, timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, run()).result()


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The URL of this session's own, empty database."""
    name = f"evald_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        admin_sql(f'CREATE DATABASE "{name}"')
    except (TimeoutError, OSError, asyncpg.PostgresError) as exc:
        reason = f"PostgreSQL not reachable at {ADMIN_URL} ({type(exc).__name__}: {exc})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true requires it", pytrace=False)
        pytest.skip(reason)
    try:
        yield _with_database(ADMIN_URL, name)
    finally:
        admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def new_database(beside: str, suffix: str) -> AsyncIterator[str]:
    """A fresh, empty database on the server of ``beside`` (a database URL), named after
    it with ``suffix``; its URL, and the database dropped at the end."""
    name = f"{urlsplit(beside).path.strip('/')}_{suffix}"
    admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield _with_database(ADMIN_URL, name)
        finally:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def empty(url: str) -> None:
    """Empty every evald table of the database (one that was never migrated is empty)."""
    conn = await asyncpg.connect(url, timeout=5)
    try:
        # Every table the migrations made (a table a later migration adds included),
        # but the schema version itself.
        tables = await conn.fetch(
            "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema() "
            "AND tablename <> 'schema_version' ORDER BY tablename"
        )
        if tables:
            names = ", ".join(t[0] for t in tables)
            await conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
    finally:
        await conn.close()
