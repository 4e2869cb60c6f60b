"""Schema versions and migrations, on real SQLite files."""

import sqlite3
from pathlib import Path

import pytest

from evald_server.domain import RunState, SubtaskState
from evald_server.store import LATEST_VERSION, SqliteStore, StoreError, schema_version

FIXTURES = Path(__file__).parent / "fixtures"


def _version(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return schema_version(conn)
    finally:
        conn.close()


@pytest.mark.anyio
async def test_a_new_database_is_created_at_the_latest_version(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "new.sqlite3")
    await store.close()
    assert _version(tmp_path / "new.sqlite3") == LATEST_VERSION
    conn = sqlite3.connect(tmp_path / "new.sqlite3")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


@pytest.mark.anyio
async def test_a_version_1_database_is_migrated_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript((FIXTURES / "schema_v1.sql").read_text())
    conn.close()
    assert _version(path) == 1

    store = await SqliteStore.open(path)
    try:
        run = await store.get_run("run_old")
        assert run is not None
        assert run.state is RunState.RUNNING
        assert run.counters.succeeded == 1
        assert run.last_seq == 2
        assert run.oldest_seq == 1
        rows = await store.task_subtasks("task_old", (), 0, 10)
        assert [r.state for r in rows] == [SubtaskState.SUCCEEDED, SubtaskState.PENDING]
        assert rows[0].output == "positive"
        assert rows[0].fields["text"] == "good film"
        assert rows[0].scores is None  # the column version 2 added
        assert await store.read_results("run_old") == []  # the table version 2 added
    finally:
        await store.close()
    assert _version(path) == LATEST_VERSION


@pytest.mark.anyio
async def test_a_database_from_a_newer_evald_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.sqlite3"
    store = await SqliteStore.open(path)
    await store.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE schema_version SET version = ?", (LATEST_VERSION + 1,))
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="newer than this evald supports"):
        await SqliteStore.open(path)


@pytest.mark.anyio
async def test_store_urls_are_validated(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="unknown store URL options"):
        await SqliteStore.from_url(f"sqlite:///{tmp_path}/x.sqlite3?mode=fast")
    with pytest.raises(StoreError, match="synchronous must be one of"):
        await SqliteStore.from_url(f"sqlite:///{tmp_path}/x.sqlite3?synchronous=off")
    store = await SqliteStore.from_url(f"sqlite:///{tmp_path}/x.sqlite3?synchronous=full")
    await store.close()
    assert (tmp_path / "x.sqlite3").exists()


@pytest.mark.anyio
async def test_a_closed_store_says_so_instead_of_hanging(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "closed.sqlite3")
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.get_run("run_x")
