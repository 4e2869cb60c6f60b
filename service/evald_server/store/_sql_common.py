"""Helpers shared by the SQLite operations: transactions, row mapping, counters, events.

Every function here runs on a store thread with that thread's connection.
"""

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from evald_server.domain import (
    Cost,
    Counters,
    EvalError,
    EventKind,
    RunState,
    RunStateChanged,
    SubtaskState,
    TaskState,
    TaskType,
    can_move,
    to_jsonable,
)
from evald_server.store._records import COUNTER_COLUMNS, EventRow, Json, NewEvent, RunRow, TaskRow


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One write transaction; ``IMMEDIATE`` takes the write lock up front."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def loads_json(text: str | None) -> Json | None:
    return None if text is None else dict(json.loads(text))


def error_json(error: EvalError | None) -> str | None:
    return None if error is None else dumps(error.to_json())


def error_from(text: str | None) -> EvalError | None:
    return None if text is None else EvalError.from_json(json.loads(text))


_COUNTERS_SQL = ", ".join(COUNTER_COLUMNS)

RUN_COLUMNS = (
    "run_id, tenant, name, spec, state, cancel_requested, "
    f"{_COUNTERS_SQL}, created_at, started_at, finished_at, last_seq, terminal_seq, "
    "request_id, request_hash, cost_picousd, cost_tokens, cost_estimated, cancel_reason"
)
TASK_COLUMNS = (
    "t.task_id, t.run_id, t.ordinal, t.model_id, t.model, t.dataset_id, t.state, "
    + ", ".join(f"t.{c}" for c in COUNTER_COLUMNS)
    + ", t.started_at, t.finished_at, t.result_status, d.name, d.benchmark_version, d.task_type"
)
TASKS_FROM = "FROM tasks t JOIN datasets d ON d.dataset_id = t.dataset_id"


def _counters(row: tuple[Any, ...], start: int) -> Counters:
    return Counters(*(int(v) for v in row[start : start + len(COUNTER_COLUMNS)]))


def run_from(row: tuple[Any, ...], oldest_seq: int) -> RunRow:
    n = len(COUNTER_COLUMNS)
    return RunRow(
        run_id=row[0],
        tenant=row[1],
        name=row[2],
        spec=json.loads(row[3]),
        state=RunState(row[4]),
        cancel_requested=bool(row[5]),
        counters=_counters(row, 6),
        created_at=row[6 + n],
        started_at=row[7 + n],
        finished_at=row[8 + n],
        last_seq=int(row[9 + n]),
        terminal_seq=row[10 + n],
        oldest_seq=oldest_seq,
        request_id=row[11 + n],
        request_hash=row[12 + n],
        cost=Cost(picousd=int(row[13 + n]), tokens=int(row[14 + n]), estimated=bool(row[15 + n])),
        cancel_reason=row[16 + n],
    )


def task_from(row: tuple[Any, ...]) -> TaskRow:
    n = len(COUNTER_COLUMNS)
    return TaskRow(
        task_id=row[0],
        run_id=row[1],
        ordinal=int(row[2]),
        model_id=row[3],
        model=json.loads(row[4]),
        dataset_id=row[5],
        state=TaskState(row[6]),
        counters=_counters(row, 7),
        started_at=row[7 + n],
        finished_at=row[8 + n],
        result_status=row[9 + n],
        dataset_name=row[10 + n],
        dataset_version=row[11 + n],
        task_type=TaskType(row[12 + n]),
    )


def read_run(conn: sqlite3.Connection, run_id: str) -> RunRow | None:
    row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    oldest = conn.execute("SELECT MIN(seq) FROM events WHERE run_id = ?", (run_id,)).fetchone()[0]
    last_seq = int(row[9 + len(COUNTER_COLUMNS)])
    return run_from(row, int(oldest) if oldest is not None else last_seq + 1)


def read_tasks(conn: sqlite3.Connection, run_id: str) -> list[TaskRow]:
    rows = conn.execute(
        f"SELECT {TASK_COLUMNS} {TASKS_FROM} WHERE t.run_id = ? ORDER BY t.ordinal", (run_id,)
    ).fetchall()
    return [task_from(row) for row in rows]


class CounterDeltas:
    """Per-task and per-run counter changes, applied together in the open transaction."""

    def __init__(self) -> None:
        self.tasks: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.runs: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))

    def move(
        self, run_id: str, task_id: str, source: SubtaskState, target: SubtaskState, n: int = 1
    ) -> None:
        if source is target or n == 0:
            return
        if not can_move(source, target):  # a bug in the store, never a client's doing
            raise ValueError(f"a subtask cannot move from {source} to {target}")
        for bucket in (self.tasks[task_id], self.runs[run_id]):
            bucket[source.value] -= n
            bucket[target.value] += n

    def add_pending(self, run_id: str, task_id: str, n: int) -> None:
        """New subtasks (a judge phase's), pending: ``total`` and ``pending`` grow."""
        for bucket in (self.tasks[task_id], self.runs[run_id]):
            bucket["total"] += n
            bucket[SubtaskState.PENDING.value] += n

    def apply(self, conn: sqlite3.Connection) -> None:
        for table, key, changes in (
            ("tasks", "task_id", self.tasks),
            ("runs", "run_id", self.runs),
        ):
            for ident, delta in changes.items():
                columns = [c for c, v in delta.items() if v]
                if not columns:
                    continue
                assignments = ", ".join(f"{c} = {c} + ?" for c in columns)
                conn.execute(
                    f"UPDATE {table} SET {assignments} WHERE {key} = ?",
                    [delta[c] for c in columns] + [ident],
                )


def append_events(
    conn: sqlite3.Connection, run_id: str, events: Iterable[NewEvent], retain: int
) -> list[EventRow]:
    """Append to the run's log with the next seqs; prune beyond ``retain`` entries."""
    pending = list(events)
    if not pending:
        return []
    last = int(conn.execute("SELECT last_seq FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])
    rows = [
        EventRow(run_id=run_id, seq=last + i, time=e.time, kind=e.kind, payload=e.payload)
        for i, e in enumerate(pending, start=1)
    ]
    conn.executemany(
        "INSERT INTO events (run_id, seq, time, kind, payload) VALUES (?, ?, ?, ?, ?)",
        [(r.run_id, r.seq, r.time, r.kind.value, dumps(r.payload)) for r in rows],
    )
    new_last = rows[-1].seq
    conn.execute("UPDATE runs SET last_seq = ? WHERE run_id = ?", (new_last, run_id))
    if new_last > retain:
        conn.execute(
            "DELETE FROM events WHERE run_id = ? AND seq <= ?", (run_id, new_last - retain)
        )
    return rows


def state_event(
    state: RunState,
    now: float,
    previous: RunState | None = None,
    *,
    cancel_requested: bool = False,
    retried: int = 0,
    cancel_reason: str | None = None,
) -> NewEvent:
    body = RunStateChanged(state, previous, cancel_requested, retried, cancel_reason)
    return NewEvent(kind=EventKind.RUN_STATE, payload=to_jsonable(body), time=now)


def group_by_run(events: Iterable[tuple[str, NewEvent]]) -> Mapping[str, list[NewEvent]]:
    grouped: defaultdict[str, list[NewEvent]] = defaultdict(list)
    for run_id, event in events:
        grouped[run_id].append(event)
    return grouped
