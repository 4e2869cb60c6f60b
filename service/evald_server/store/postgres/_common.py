"""What the PostgreSQL operations share: run locks, counter moves, the event log and its
notices, a run read back, tasks moved to scoring, judge rows written.

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

from evald_server.store._plans import (
    Answer,
    CounterDeltas,
    JudgePlan,
    event_values,
    judge_rows,
    numbered_events,
    tasks_to_score,
)
from evald_server.store._records import EventRow, NewEvent, RunRow
from evald_server.store._rows import (
    COUNTER_COLUMNS,
    JUDGE_SUBTASK_COLUMNS,
    RUNS_FROM,
    TASK_PROGRESS_COLUMNS,
    judges_from,
    run_from,
)

CHANNEL = "evald"
EVERYONE = "*"  # the origin of a notice every replica acts on, its sender included

# Notice kinds: "<kind> <origin> <run id> [<detail>]".
EVENTS = "events"  # detail: the run's last seq
WORK = "work"  # ready work appeared (a new run, a retry, requeued subtasks)
CANCEL = "cancel"
FINISHED = "finished"
SCORING = "scoring"  # detail: a task id whose scoring job is free to claim


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


_ADD = ", ".join(f"{c} = {c} + ${i}" for i, c in enumerate(COUNTER_COLUMNS, start=1))
_KEY = f"${len(COUNTER_COLUMNS) + 1}"
_TASK_COUNTERS = f"UPDATE tasks SET {_ADD} WHERE task_id = {_KEY}"
_RUN_COUNTERS = f"UPDATE runs SET {_ADD} WHERE run_id = {_KEY}"


async def apply_deltas(conn: asyncpg.Connection, deltas: CounterDeltas) -> None:
    """The counter moves, in key order, one pipelined statement per table."""
    tasks, runs = deltas.rows()
    for sql, rows in ((_TASK_COUNTERS, tasks), (_RUN_COUNTERS, runs)):
        if rows:
            await conn.executemany(sql, rows)


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
    rows = numbered_events(run_id, int(last) - n + 1, events)
    _, seqs, times, kinds, payloads = zip(*event_values(rows), strict=True)
    await conn.execute(
        "INSERT INTO events (run_id, seq, time, kind, payload) "
        "SELECT $1, s, t, k, p FROM unnest($2::bigint[], $3::float8[], $4::text[], $5::text[]) "
        "AS u(s, t, k, p)",
        run_id,
        list(seqs),
        list(times),
        list(kinds),
        list(payloads),
    )
    if last > retain:
        await conn.execute(
            "DELETE FROM events WHERE run_id = $1 AND seq <= $2", run_id, int(last) - retain
        )
    await notify(conn, [notice(EVENTS, origin, run_id, str(last))])
    return rows


async def read_run(conn: asyncpg.Connection, run_id: str) -> RunRow | None:
    row = await conn.fetchrow(f"{RUNS_FROM} WHERE run_id = $1", run_id)
    return None if row is None else run_from(row)


async def finish_ready_tasks(
    conn: asyncpg.Connection, task_ids: Sequence[str], now: float
) -> list[str]:
    """Move tasks whose inference is finished to ``scoring`` (free for any scorer);
    return their ids, in id order."""
    if not task_ids:
        return []
    rows = await conn.fetch(
        f"SELECT {TASK_PROGRESS_COLUMNS} FROM tasks WHERE task_id = ANY($1::text[]) "
        "ORDER BY task_id",
        sorted(task_ids),
    )
    finished = tasks_to_score(rows)
    if finished:
        await conn.execute(
            "UPDATE tasks SET state = 'scoring', finished_at = $1, scorer = NULL "
            "WHERE task_id = ANY($2::text[])",
            now,
            finished,
        )
    return finished


async def create_judge_subtasks(
    conn: asyncpg.Connection,
    answers: Sequence[Answer],
    deltas: CounterDeltas,
    now: float,
    cancelling: frozenset[str] | set[str] = frozenset(),
) -> JudgePlan:
    """Insert (``COPY``) the judge subtasks the succeeded ``answers`` call for
    (``plans.judge_rows``), counted into ``deltas``; under the runs' locks."""
    if not answers:
        return JudgePlan([], [])
    judges = judges_from(
        await conn.fetch(
            "SELECT task_id, judge_model_id, judge_rounds FROM tasks "
            "WHERE task_id = ANY($1::text[]) AND judge_rounds > 0",
            sorted({a.task_id for a in answers}),
        )
    )
    plan = judge_rows(answers, judges, now, deltas, cancelling=cancelling)
    if plan.rows:
        await conn.copy_records_to_table(
            "subtasks", records=plan.rows, columns=JUDGE_SUBTASK_COLUMNS
        )
    return plan


def clean_text(text: str | None) -> str | None:
    """PostgreSQL text cannot hold NUL: an answer with one keeps it as U+FFFD."""
    if text is None or "\x00" not in text:
        return text
    return text.replace("\x00", "\ufffd")
