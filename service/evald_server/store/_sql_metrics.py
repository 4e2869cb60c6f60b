"""Counts for the metrics endpoint: runs, tasks and subtasks by state, over all tenants."""

import sqlite3

from evald_server.store._records import COUNTER_COLUMNS, StateCounts


def state_counts(conn: sqlite3.Connection) -> StateCounts:
    runs = dict(conn.execute("SELECT state, COUNT(*) FROM runs GROUP BY state").fetchall())
    tasks = dict(conn.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall())
    states = [c for c in COUNTER_COLUMNS if c != "total"]
    # The tasks' counters move with every committed outcome: summing them reads no subtask.
    sums = conn.execute(
        "SELECT " + ", ".join(f"COALESCE(SUM({c}), 0)" for c in states) + " FROM tasks"
    ).fetchone()
    return StateCounts(
        runs={str(k): int(v) for k, v in runs.items()},
        tasks={str(k): int(v) for k, v in tasks.items()},
        subtasks={state: int(value) for state, value in zip(states, sums, strict=True)},
    )
