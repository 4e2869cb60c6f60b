"""Shared parts of the reliability suite: configs on a fake provider, the store read
straight from its SQLite file, rpc status details, bounded waits.

The store is read with the ``sqlite3`` module, not through evald: a recount that used
evald's own code could not catch evald's own counting bugs.
"""

import contextlib
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import psutil

from tests.harness import (
    LISTENING,
    START_TIMEOUT_S,
    ServerProcess,
    _readline_within,
    config_data,
    write_config,
)

COUNTERS = ("pending", "running", "succeeded", "failed", "failed_permanent", "cancelled")
TERMINAL = frozenset({"succeeded", "failed_permanent", "cancelled"})


def fake_model(base_url: str, model_id: str = "fake", **fields: Any) -> dict[str, Any]:
    """A ``[[models]]`` entry of provider ``openai`` pointing at a fake provider."""
    return {"id": model_id, "provider": "openai", "base_url": base_url, **fields}


def server_config(
    tmp_path: Path,
    models: Sequence[Mapping[str, Any]],
    *,
    limits: Mapping[str, Any] | None = None,
    tokens: Mapping[str, str] | None = None,
    grace_s: float = 2.0,
) -> Path:
    """Write a config (fresh SQLite file in ``tmp_path``, port 0) and return its path."""
    data = config_data(
        tmp_path,
        models=[dict(m) for m in models],
        limits=limits,
        tokens=tokens,
        server={"listen": "127.0.0.1:0", "grace_s": grace_s},
    )
    return write_config(tmp_path, data)


def db_path(tmp_path: Path) -> Path:
    return tmp_path / "evald.sqlite3"


# -- servers -------------------------------------------------------------------------------


class LoggingServerProcess(ServerProcess):
    """``ServerProcess`` with a log level (DEBUG shows every line a provider might log)."""

    def __init__(self, config_path: Path, *, log_level: str, **options: Any) -> None:
        super().__init__(config_path, **options)
        self.log_level = log_level

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        stderr = self.stderr_path.open("a")
        command = [sys.executable, "-m", "evald_server.api", "--config", str(self.config_path)]
        self.process = subprocess.Popen(
            [*command, "--log-level", self.log_level],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=self.env,
        )
        stderr.close()
        line = _readline_within(self.process, timeout_s)
        if not line.startswith(LISTENING):
            self.kill()
            raise RuntimeError(f"server did not start: {line!r}; stderr: {self.stderr()}")
        self.address = line[len(LISTENING) :].strip()
        return self.address


async def start_server(server: ServerProcess) -> str:
    """Start a server process without blocking the event loop; returns its address."""
    return await anyio.to_thread.run_sync(server.start)


def release(server: ServerProcess) -> None:
    """Close our end of the server's stdout pipe (ServerProcess keeps it open)."""
    if server.process is not None and server.process.stdout is not None:
        server.process.stdout.close()


def kill(server: ServerProcess) -> None:
    """SIGKILL (a crash) and release the pipe."""
    server.kill()
    release(server)


def children_of(server: ServerProcess) -> list[int]:
    """The pids of the server's child processes (scoring workers) right now."""
    assert server.process is not None
    try:
        return [p.pid for p in psutil.Process(server.process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


async def orphans_after(pids: Sequence[int], *, timeout_s: float = 30.0) -> list[int]:
    """Wait for processes left by a killed server to exit; kill (by pid) and return any
    still alive after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if psutil.pid_exists(pid) and not _zombie(pid)]
        if alive:
            await anyio.sleep(0.1)
    for pid in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
    return alive


def _zombie(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


# -- the store, read directly -----------------------------------------------------------------


def connect_ro(path: Path) -> sqlite3.Connection:
    """A read-only connection: it never checkpoints or deletes the server's WAL."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


def query(path: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    conn = connect_ro(path)
    try:
        return conn.execute(sql, tuple(params)).fetchall()
    finally:
        conn.close()


def dump(path: Path) -> list[str]:
    """Every table's schema and rows, as SQL text (``iterdump``): nothing left out."""
    conn = connect_ro(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def succeeded_keys(path: Path, run_id: str | None = None) -> set[str]:
    """Public ids (the provider's request keys) of the subtasks stored as succeeded."""
    sql = "SELECT task_id, record_idx, repeat_index FROM subtasks WHERE state = 'succeeded'"
    rows = query(path, sql + (" AND run_id = ?" if run_id else ""), (run_id,) if run_id else ())
    return {f"{t}.{r}.{k}" for t, r, k in rows}


def task_states(path: Path) -> dict[str, str]:
    return {
        str(task_id): str(state)
        for task_id, state in query(path, "SELECT task_id, state FROM tasks")
    }


@dataclass(frozen=True)
class StoreCheck:
    run_state: str
    subtasks: int
    states: Mapping[str, int]


def check_run_in_store(path: Path, run_id: str, *, expected_subtasks: int) -> StoreCheck:
    """Assert the run's store invariants: one row per (task, record, repeat), every one
    terminal, and the run's and each task's counters equal to a recount of the rows."""
    conn = connect_ro(path)
    try:
        keys = conn.execute(
            "SELECT task_id, record_idx, repeat_index, COUNT(*) FROM subtasks WHERE run_id = ? "
            "GROUP BY task_id, record_idx, repeat_index",
            (run_id,),
        ).fetchall()
        assert len(keys) == expected_subtasks, "a subtask is missing or unexpected"
        assert all(row[3] == 1 for row in keys), "a subtask is stored twice"
        states = Counter(
            dict(
                conn.execute(
                    "SELECT state, COUNT(*) FROM subtasks WHERE run_id = ? GROUP BY state",
                    (run_id,),
                ).fetchall()
            )
        )
        assert set(states) <= TERMINAL, f"non-terminal subtasks left: {dict(states)}"
        columns = ", ".join(("total", *COUNTERS))
        for task_id, *stored in conn.execute(
            f"SELECT task_id, {columns} FROM tasks WHERE run_id = ?", (run_id,)
        ).fetchall():
            recount = Counter(
                dict(
                    conn.execute(
                        "SELECT state, COUNT(*) FROM subtasks WHERE task_id = ? GROUP BY state",
                        (task_id,),
                    ).fetchall()
                )
            )
            expected = [sum(recount.values()), *(recount[c] for c in COUNTERS)]
            assert stored == expected, f"task {task_id} counters {stored} != recount {expected}"
        run_row = conn.execute(
            f"SELECT state, {columns} FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        assert run_row is not None
        run_state, *stored_run = run_row
        expected_run = [sum(states.values()), *(states[c] for c in COUNTERS)]
        assert stored_run == expected_run, f"run counters {stored_run} != recount {expected_run}"
        return StoreCheck(run_state, sum(states.values()), dict(states))
    finally:
        conn.close()
