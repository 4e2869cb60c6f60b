"""Helpers shared by the PostgreSQL operations: run locks, counters, events, notices.

Lock order, the rule that keeps replicas free of deadlocks: a transaction that changes a
run's rows first locks the run row(s) (``lock_runs``, in run id order), then touches its
tasks and subtasks. So every writer of one run is ordered by that lock, as the SQLite
writer thread orders them all, and the counters a transaction moves are always consistent
with the subtask rows it changed.

Notices: changes other replicas must act on are sent with ``pg_notify`` inside the
transaction that makes them (PostgreSQL delivers them at commit, never for a rollback).
"""

from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

from evald_server.domain import SubtaskState
from evald_server.store._records import COUNTER_COLUMNS, EventRow, NewEvent, RunRow
from evald_server.store._sql_common import RUN_COLUMNS, CounterDeltas, dumps, run_from

CHANNEL = "evald"
EVERYONE = "*"  # the origin of a notice every replica acts on, its sender included

# Notice kinds: "<kind> <origin> <run id> [<detail>]".
EVENTS = "events"  # detail: the run's last seq
WORK = "work"  # ready work appeared (a new run, a retry, requeued subtasks)
CANCEL = "cancel"
FINISHED = "finished"
SCORING = "scoring"  # detail: a task id whose scoring job is free to claim

_STATES = [c for c in COUNTER_COLUMNS if c != "total"]
# What a new subtask row is written with (COPY), a run's or a judge phase's.
NEW_SUBTASK_COLUMNS = (
    "run_id",
    "task_id",
    "model_id",
    "record_idx",
    "repeat_index",
    "state",
    "updated_at",
)
_COUNTED = ["total", *_STATES]  # total moves only when subtasks are added (judge rows)


def notice(kind: str, origin: str, run_id: str, detail: str = "") -> str:
    return f"{kind} {origin} {run_id} {detail}".rstrip()


async def notify(conn: asyncpg.Connection, payloads: Iterable[str]) -> None:
    batch = list(payloads)
    if batch:
        await conn.execute("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p", CHANNEL, batch)


async def lock_runs(conn: asyncpg.Connection, run_ids: Iterable[str]) -> dict[str, Any]:
    """Lock the runs (in id order); returns run id → (state, cancel_requested) record."""
    rows = await conn.fetch(
        "SELECT run_id, state, cancel_requested FROM runs WHERE run_id = ANY($1::text[]) "
        "ORDER BY run_id FOR UPDATE",
        sorted(set(run_ids)),
    )
    return {r["run_id"]: r for r in rows}


_TASK_COUNTERS = (
    "UPDATE tasks SET "
    + ", ".join(f"{c} = {c} + ${i}" for i, c in enumerate(_COUNTED, start=2))
    + " WHERE task_id = $1"
)
_RUN_COUNTERS = _TASK_COUNTERS.replace("UPDATE tasks", "UPDATE runs").replace(
    "task_id = $1", "run_id = $1"
)


async def apply_deltas(conn: asyncpg.Connection, deltas: CounterDeltas) -> None:
    """The counter moves, in key order, one pipelined statement per table."""
    for sql, changes in ((_TASK_COUNTERS, deltas.tasks), (_RUN_COUNTERS, deltas.runs)):
        rows = [
            (key, *(changes[key].get(column, 0) for column in _COUNTED))
            for key in sorted(changes)
            if any(changes[key].values())
        ]
        if rows:
            await conn.executemany(sql, rows)


def count_moves(
    deltas: CounterDeltas,
    run_id: str,
    task_ids: Iterable[str],
    source: SubtaskState,
    target: SubtaskState,
) -> int:
    """Count one move per task id seen (the RETURNING of an UPDATE); returns the total."""
    per_task: dict[str, int] = {}
    for task_id in task_ids:
        per_task[task_id] = per_task.get(task_id, 0) + 1
    for task_id, n in per_task.items():
        deltas.move(run_id, task_id, source, target, n)
    return sum(per_task.values())


async def append_events(
    conn: asyncpg.Connection,
    run_id: str,
    events: Sequence[NewEvent],
    retain: int,
    origin: str,
) -> list[EventRow]:
    """Append with the next seqs (gap-free: assigned under the run's row lock, undone
    with a rollback); prune beyond ``retain``; notify the watchers of every replica."""
    if not events:
        return []
    n = len(events)
    last = await conn.fetchval(
        "UPDATE runs SET last_seq = last_seq + $2 WHERE run_id = $1 RETURNING last_seq",
        run_id,
        n,
    )
    first = int(last) - n + 1
    rows = [
        EventRow(run_id=run_id, seq=first + i, time=e.time, kind=e.kind, payload=e.payload)
        for i, e in enumerate(events)
    ]
    await conn.execute(
        "INSERT INTO events (run_id, seq, time, kind, payload) "
        "SELECT $1, s, t, k, p FROM unnest($2::bigint[], $3::float8[], $4::text[], $5::text[]) "
        "AS u(s, t, k, p)",
        run_id,
        [r.seq for r in rows],
        [r.time for r in rows],
        [r.kind.value for r in rows],
        [dumps(r.payload) for r in rows],
    )
    if last > retain:
        await conn.execute(
            "DELETE FROM events WHERE run_id = $1 AND seq <= $2", run_id, int(last) - retain
        )
    await notify(conn, [notice(EVENTS, origin, run_id, str(last))])
    return rows


async def read_run(conn: asyncpg.Connection, run_id: str) -> RunRow | None:
    row = await conn.fetchrow(
        f"SELECT {RUN_COLUMNS}, (SELECT MIN(seq) FROM events e WHERE e.run_id = r.run_id) "
        "FROM runs r WHERE run_id = $1",
        run_id,
    )
    return None if row is None else run_with_oldest(row)


def run_with_oldest(row: Any) -> RunRow:
    """A runs row selected with ``RUN_COLUMNS`` and, last, the oldest retained seq."""
    values = tuple(row)
    oldest = values[-1]
    last_seq = int(values[9 + len(COUNTER_COLUMNS)])
    return run_from(values[:-1], int(oldest) if oldest is not None else last_seq + 1)


def clean_text(text: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL: an answer with one keeps it as U+FFFD."""
    if text is None or "\x00" not in text:
        return text
    return text.replace("\x00", "\ufffd")
