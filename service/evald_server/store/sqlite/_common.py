"""What the SQLite operations share: the write transaction, counter moves, the event log,
a run read back, tasks moved to scoring, judge rows written.

Every function here runs on a store thread with that thread's connection; the writer's
are called inside ``transaction``.
"""

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

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


def marks(n: int) -> str:
    """``n`` placeholders, for an ``IN (…)`` list."""
    return ",".join("?" * n)


_ADD = ", ".join(f"{c} = {c} + ?" for c in COUNTER_COLUMNS)
_TASK_COUNTERS = f"UPDATE tasks SET {_ADD} WHERE task_id = ?"
_RUN_COUNTERS = f"UPDATE runs SET {_ADD} WHERE run_id = ?"


def apply_deltas(conn: sqlite3.Connection, deltas: CounterDeltas) -> None:
    tasks, runs = deltas.rows()
    conn.executemany(_TASK_COUNTERS, tasks)
    conn.executemany(_RUN_COUNTERS, runs)


def append_events(
    conn: sqlite3.Connection, run_id: str, events: Iterable[NewEvent], retain: int
) -> list[EventRow]:
    """Append to the run's log with the next seqs; prune beyond ``retain`` entries."""
    pending = list(events)
    if not pending:
        return []
    last = int(conn.execute("SELECT last_seq FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0])
    rows = numbered_events(run_id, last + 1, pending)
    conn.executemany(
        "INSERT INTO events (run_id, seq, time, kind, payload) VALUES (?, ?, ?, ?, ?)",
        event_values(rows),
    )
    new_last = rows[-1].seq
    conn.execute("UPDATE runs SET last_seq = ? WHERE run_id = ?", (new_last, run_id))
    if new_last > retain:
        conn.execute(
            "DELETE FROM events WHERE run_id = ? AND seq <= ?", (run_id, new_last - retain)
        )
    return rows


def read_run(conn: sqlite3.Connection, run_id: str) -> RunRow | None:
    row = conn.execute(f"{RUNS_FROM} WHERE run_id = ?", (run_id,)).fetchone()
    return None if row is None else run_from(row)


def finish_ready_tasks(conn: sqlite3.Connection, task_ids: Sequence[str], now: float) -> list[str]:
    """Move tasks whose inference is finished to ``scoring``; return their ids."""
    if not task_ids:
        return []
    rows = conn.execute(
        f"SELECT {TASK_PROGRESS_COLUMNS} FROM tasks WHERE task_id IN ({marks(len(task_ids))})",
        list(task_ids),
    ).fetchall()
    ready = set(tasks_to_score(rows))
    finished = [task_id for task_id in task_ids if task_id in ready]  # in the order given
    conn.executemany(
        "UPDATE tasks SET state = 'scoring', finished_at = ? WHERE task_id = ?",
        [(now, task_id) for task_id in finished],
    )
    return finished


def create_judge_subtasks(
    conn: sqlite3.Connection,
    answers: Sequence[Answer],
    deltas: CounterDeltas,
    now: float,
    cancelling: frozenset[str] | set[str] = frozenset(),
) -> JudgePlan:
    """Insert the judge subtasks the succeeded ``answers`` call for (``plans.judge_rows``),
    counted into ``deltas``."""
    if not answers:
        return JudgePlan([], [])
    task_ids = sorted({a.task_id for a in answers})
    judges = judges_from(
        conn.execute(
            "SELECT task_id, judge_model_id, judge_rounds FROM tasks "
            f"WHERE task_id IN ({marks(len(task_ids))}) AND judge_rounds > 0",
            task_ids,
        )
    )
    plan = judge_rows(answers, judges, now, deltas, cancelling=cancelling)
    conn.executemany(
        f"INSERT INTO subtasks ({', '.join(JUDGE_SUBTASK_COLUMNS)}) "
        f"VALUES ({marks(len(JUDGE_SUBTASK_COLUMNS))})",
        plan.rows,
    )
    return plan
