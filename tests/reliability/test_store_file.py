"""One server per SQLite store, and a lost store is loud: real server processes.

A second server on a store file another one holds is refused at start, naming the
holder, and leaves the first one's work alone; the lock dies with its holder. A store
file deleted or replaced under a running server stops it with a loud log line and a
one-line reason. A read-only store file or directory is a one-line reason.
"""

import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from evald_server.store import StoreLocked, StoreLost
from evald_server.store.sqlite._store_file import StoreFileGuard
from tests._shared import classification_records, wait_for
from tests.reliability._rig import rig
from tests.reliability._support import query

pytestmark = pytest.mark.anyio

RECORDS = 200


def _start_fails(config: Path) -> tuple[int, str]:
    """Run a server that must not start; (exit code, stderr)."""
    done = subprocess.run(
        [sys.executable, "-m", "evald_server.api", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "evald listening on" not in done.stdout
    return done.returncode, done.stderr


def _remove(db: Path, suffixes: tuple[str, ...]) -> None:
    for suffix in suffixes:
        Path(str(db) + suffix).unlink(missing_ok=True)


async def test_a_second_server_on_the_same_store_is_refused_naming_the_holder(
    tmp_path: Path,
) -> None:
    async with rig(tmp_path, latency_ms=30.0, max_concurrency=4) as the_rig:
        address = await the_rig.start()
        first = the_rig.server
        assert first.process is not None
        async with the_rig.client(address) as client:
            await client.upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=classification_records(RECORDS),
            )
            run = await client.create_run(models=["fake"], datasets=[("reviews", "1.0.0")])

            async def some_running() -> bool:
                rows = query(
                    the_rig.db, "SELECT COUNT(*) FROM subtasks WHERE state = 'running'", ()
                )
                return int(rows[0][0]) > 0

            await wait_for(some_running, timeout_s=30)
            code, stderr = await anyio.to_thread.run_sync(_start_fails, the_rig.config)
            assert code == 2, stderr
            (line,) = stderr.strip().splitlines()  # one line, no traceback
            assert line.startswith("evald: cannot open the store: ")
            assert f"pid {first.process.pid} on " in line
            assert "in use by another evald server" in line
            # The refused server touched nothing: no requeue of the first one's work.
            final = await client.wait(run.run_id, timeout_s=90)
        assert final.state.value == "succeeded"
        the_rig.assert_complete(run.run_id, RECORDS)
        assert await the_rig.fake.control.duplicates_after_success() == {}

        # The lock lives as long as its holder, however it dies.
        await the_rig.kill()
        await the_rig.start()


async def test_a_deleted_store_file_stops_the_server_loudly(tmp_path: Path) -> None:
    async with rig(tmp_path, latency_ms=20.0, max_concurrency=4) as the_rig:
        address = await the_rig.start()
        async with the_rig.client(address) as client:
            await client.upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=classification_records(RECORDS),
            )
            await client.create_run(models=["fake"], datasets=[("reviews", "1.0.0")])
        _remove(the_rig.db, ("", "-wal", "-shm"))
        server = the_rig.server
        assert server.process is not None
        code = await anyio.to_thread.run_sync(lambda: server.process.wait(timeout=30))  # type: ignore[union-attr]
        stderr = server.stderr()
        assert code == 1, stderr
        assert "STORE LOST: the store file" in stderr
        assert "was deleted while the server ran; writes are refused" in stderr
        last = stderr.strip().splitlines()[-1]
        assert last.startswith("evald: stopped: the store file"), last


async def test_a_replaced_store_file_is_noticed_and_refused(tmp_path: Path) -> None:
    async with rig(tmp_path, latency_ms=20.0) as the_rig:
        await the_rig.start()
        other = tmp_path / "other.sqlite3"
        shutil.copy(the_rig.db, other)
        os.replace(other, the_rig.db)
        server = the_rig.server
        code = await anyio.to_thread.run_sync(lambda: server.process.wait(timeout=30))  # type: ignore[union-attr]
        assert code == 1
        assert "was replaced by another file" in server.stderr()


async def test_the_guard_refuses_writes_once_the_file_is_gone(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    sqlite3.connect(db).close()
    guard = StoreFileGuard(db)
    guard.acquire()
    try:
        guard.remember_identity()
        guard.verify()
        with pytest.raises(StoreLocked, match=f"pid {os.getpid()} on "):
            StoreFileGuard(db).acquire()
        db.unlink()
        with pytest.raises(StoreLost, match="was deleted"):
            guard.verify()
        sqlite3.connect(db).close()  # a new file at the same path is still not ours
        with pytest.raises(StoreLost, match="was deleted"):
            guard.verify()
    finally:
        guard.release()
    StoreFileGuard(db).acquire()  # released: another may take it


@contextmanager
def _immutable(path: Path) -> Iterator[None]:
    """``chattr +i``: read-only even for root (which ignores permission bits)."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not available")
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not permitted here: {done.stderr!r}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@pytest.mark.parametrize("what", ["file", "directory"])
async def test_a_read_only_store_is_a_one_line_reason(tmp_path: Path, what: str) -> None:
    async with rig(tmp_path) as the_rig:
        await the_rig.start()
        await the_rig.terminate()
        _remove(the_rig.db, ("-wal", "-shm", ".lock"))
        target = the_rig.db if what == "file" else the_rig.db.parent / "store"
        config = the_rig.config
        if what == "directory":
            target.mkdir()
            shutil.move(the_rig.db, target / the_rig.db.name)
            text = config.read_text().replace(str(the_rig.db), str(target / the_rig.db.name))
            config.write_text(text)
        with _immutable(target):
            code, stderr = await anyio.to_thread.run_sync(_start_fails, config)
        assert code == 2, stderr
        (line,) = stderr.strip().splitlines()
        assert line.startswith("evald: cannot open the store: ")
        assert "read-only" in line
