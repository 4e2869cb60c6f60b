"""Read-only queries on SQLite; they run on reader threads and never block the writer
(WAL)."""

import sqlite3
from collections.abc import Sequence
from typing import Any

from evald_server.domain import Counters, SubtaskPhase, SubtaskState
from evald_server.store._records import (
    EventRow,
    Json,
    JudgeVerdictRow,
    ProfileInputs,
    RunRow,
    StateCounts,
    SubtaskRow,
    TaskOutput,
    TaskRow,
)
from evald_server.store._rows import (
    OUTPUT_COLUMNS,
    RUNS_FROM,
    STATE_COLUMNS,
    SUBTASK_COLUMNS,
    SUBTASKS_FROM,
    TASK_COLUMNS,
    TASKS_FROM,
    event_from,
    outputs_from,
    recounted,
    results_from,
    run_from,
    state_counts_from,
    subtask_from,
    task_from,
    verdict_from,
)
from evald_server.store.sqlite._common import marks, read_run


def get_run(conn: sqlite3.Connection, run_id: str) -> RunRow | None:
    return read_run(conn, run_id)


def list_runs(
    conn: sqlite3.Connection,
    tenant: str,
    states: Sequence[str],
    after: tuple[float, str] | None,
    limit: int,
) -> list[RunRow]:
    """Newest first, keyset-paginated on (created_at, run_id)."""
    sql = f"{RUNS_FROM} WHERE tenant = ?"
    params: list[Any] = [tenant]
    if states:
        sql += f" AND state IN ({marks(len(states))})"
        params.extend(states)
    if after is not None:
        sql += " AND (created_at, run_id) < (?, ?)"
        params.extend(after)
    sql += " ORDER BY created_at DESC, run_id DESC LIMIT ?"
    params.append(limit)
    return [run_from(row) for row in conn.execute(sql, params).fetchall()]


def find_run_by_request(conn: sqlite3.Connection, tenant: str, request_id: str) -> RunRow | None:
    row = conn.execute(
        f"{RUNS_FROM} WHERE tenant = ? AND request_id = ?", (tenant, request_id)
    ).fetchone()
    return None if row is None else run_from(row)


def live_run_ids(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT run_id FROM runs WHERE state IN ('pending', 'running') ORDER BY created_at"
    ).fetchall()
    return [r[0] for r in rows]


def get_tasks(conn: sqlite3.Connection, run_id: str) -> list[TaskRow]:
    rows = conn.execute(
        f"SELECT {TASK_COLUMNS} {TASKS_FROM} WHERE t.run_id = ? ORDER BY t.ordinal", (run_id,)
    ).fetchall()
    return [task_from(row) for row in rows]


def get_task(conn: sqlite3.Connection, task_id: str) -> TaskRow | None:
    row = conn.execute(
        f"SELECT {TASK_COLUMNS} {TASKS_FROM} WHERE t.task_id = ?", (task_id,)
    ).fetchone()
    return None if row is None else task_from(row)


def scoring_task_ids(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT task_id FROM tasks WHERE state = 'scoring' ORDER BY rowid")
    return [r[0] for r in rows]


def read_events(
    conn: sqlite3.Connection, run_id: str, after_seq: int, limit: int
) -> list[EventRow]:
    rows = conn.execute(
        "SELECT seq, time, kind, payload FROM events WHERE run_id = ? AND seq > ? "
        "ORDER BY seq LIMIT ?",
        (run_id, after_seq, limit),
    ).fetchall()
    return [event_from(run_id, r) for r in rows]


def task_subtasks(
    conn: sqlite3.Connection,
    task_id: str,
    states: Sequence[SubtaskState],
    after_row: int,
    limit: int,
    phase: SubtaskPhase = SubtaskPhase.ANSWER,
) -> list[SubtaskRow]:
    """One page of a task's subtasks of one phase (all states when ``states`` is
    empty), in order."""
    return _subtasks(
        conn, "s.task_id = ? AND s.phase = ?", [task_id, int(phase)], states, after_row, limit
    )


def run_subtasks(
    conn: sqlite3.Connection,
    run_id: str,
    task_id: str | None,
    states: Sequence[SubtaskState],
    after_row: int,
    limit: int,
    output_chars: int | None = None,
    phase: SubtaskPhase | None = SubtaskPhase.ANSWER,
) -> list[SubtaskRow]:
    """One page of a run's subtasks of one phase (None: both), optionally of one task, in
    run order; with ``output_chars``, each output cut to that many characters inside
    SQLite (a huge answer never leaves the database whole) and its full byte size read
    beside it."""
    where = "s.run_id = ?"
    params: list[Any] = [run_id]
    if task_id is not None:
        where, params = f"{where} AND s.task_id = ?", [*params, task_id]
    if phase is not None:
        where, params = f"{where} AND s.phase = ?", [*params, int(phase)]
    return _subtasks(conn, where, params, states, after_row, limit, output_chars)


def _subtasks(
    conn: sqlite3.Connection,
    where: str,
    params: list[Any],
    states: Sequence[SubtaskState],
    after_row: int,
    limit: int,
    output_chars: int | None = None,
) -> list[SubtaskRow]:
    columns = SUBTASK_COLUMNS
    if output_chars is not None:
        cut = f"substr(s.output, 1, {int(output_chars)})"
        columns = columns.replace("s.output,", f"{cut},", 1)
        columns += ", length(CAST(s.output AS BLOB))"
    sql = f"SELECT {columns} {SUBTASKS_FROM} WHERE {where} AND s.row_id > ?"
    params = [*params, after_row]
    if states:
        sql += f" AND s.state IN ({marks(len(states))})"
        params.extend(s.value for s in states)
    sql += " ORDER BY s.row_id LIMIT ?"
    params.append(limit)
    return [subtask_from(row) for row in conn.execute(sql, params).fetchall()]


def task_outputs(
    conn: sqlite3.Connection, task_id: str, after_row: int, limit: int, unexecuted: bool = False
) -> list[TaskOutput]:
    """One page of a task's succeeded answers with their records, in order (only those
    whose program has not run, when ``unexecuted``)."""
    only = " AND s.execution IS NULL" if unexecuted else ""
    rows = conn.execute(
        f"SELECT {OUTPUT_COLUMNS} {SUBTASKS_FROM} WHERE s.task_id = ? AND s.row_id > ? "
        f"AND s.state = 'succeeded' AND s.phase = 0{only} ORDER BY s.row_id LIMIT ?",
        (task_id, after_row, limit),
    ).fetchall()
    return outputs_from(rows)


def profile_inputs(
    conn: sqlite3.Connection, task_id: str, phase: SubtaskPhase = SubtaskPhase.ANSWER
) -> ProfileInputs:
    """What one phase's ExecutionProfile is computed from (the answers', or the judge
    calls')."""
    sums = conn.execute(
        "SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(MAX(requests - 1, 0)), 0), "
        "COALESCE(SUM(rate_limited), 0), COALESCE(SUM(prompt_tokens), 0), "
        "COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(call_time_s), 0), "
        "COALESCE(SUM(cache_hit), 0), MAX(updated_at) "
        "FROM subtasks WHERE task_id = ? AND phase = ?",
        (task_id, int(phase)),
    ).fetchone()
    timings = conn.execute(  # a cursor, read row by row by from_sums
        "SELECT latency_s, ttft_s FROM subtasks WHERE task_id = ? AND phase = ? "
        "AND state = 'succeeded' AND cache_hit = 0",
        (task_id, int(phase)),
    )
    answers = conn.execute(
        "SELECT COALESCE(SUM(finish_reason = 'length'), 0), "
        "COALESCE(SUM(COALESCE(output, '') = ''), 0), "
        "COALESCE(SUM(completion_tokens IS NULL AND cache_hit = 0), 0), "
        "COALESCE(SUM(CASE WHEN ttft_s IS NOT NULL AND latency_s > ttft_s "
        "THEN completion_tokens END), 0), "
        "COALESCE(SUM(CASE WHEN ttft_s IS NOT NULL AND latency_s > ttft_s "
        "AND completion_tokens IS NOT NULL THEN latency_s - ttft_s END), 0) "
        "FROM subtasks WHERE task_id = ? AND phase = ? AND state = 'succeeded'",
        (task_id, int(phase)),
    ).fetchone()
    task = get_task(conn, task_id)
    assert task is not None
    cost = conn.execute(
        "SELECT COALESCE(SUM(cost_picousd), 0), COALESCE(SUM(cost_tokens), 0), "
        "COALESCE(MAX(cost_estimated), 0), COALESCE(SUM(cost_picousd IS NULL), 0) "
        "FROM subtasks WHERE task_id = ? AND phase = ? AND state = 'succeeded' "
        "AND cost_tokens IS NOT NULL",
        (task_id, int(phase)),
    ).fetchone()
    reasons = conn.execute(
        "SELECT json_extract(last_error, '$.reason') AS reason, COUNT(*) AS n FROM subtasks "
        "WHERE task_id = ? AND phase = ? AND state = 'failed_permanent' "
        "GROUP BY reason ORDER BY n DESC",
        (task_id, int(phase)),
    ).fetchall()
    return ProfileInputs.from_sums(
        recount_task(conn, task_id, phase),
        task,
        sums=sums,
        timings=timings,
        answers=answers,
        cost=cost,
        reasons=reasons,
    )


def recount_task(
    conn: sqlite3.Connection, task_id: str, phase: SubtaskPhase | None = None
) -> Counters:
    """The task's counters recounted from its subtasks (the source of truth): of every
    phase, as the task's counters count them, or of one."""
    sql = "SELECT state, COUNT(*) FROM subtasks WHERE task_id = ?"
    params: list[Any] = [task_id]
    if phase is not None:
        sql += " AND phase = ?"
        params.append(int(phase))
    return recounted(dict(conn.execute(sql + " GROUP BY state", params).fetchall()))


def task_verdicts(
    conn: sqlite3.Connection, task_id: str, after_row: int, limit: int
) -> list[JudgeVerdictRow]:
    """One page of a task's judge subtasks, in answer order then round."""
    rows = conn.execute(
        "SELECT row_id, judged_row_id, record_idx, judge_round, state, verdict, output, "
        "json_extract(last_error, '$.reason') FROM subtasks "
        "WHERE task_id = ? AND phase = 1 AND row_id > ? ORDER BY row_id LIMIT ?",
        (task_id, after_row, limit),
    ).fetchall()
    return [verdict_from(r) for r in rows]


def read_results(conn: sqlite3.Connection, run_id: str) -> list[tuple[str, Json]]:
    rows = conn.execute(
        "SELECT r.task_id, r.result FROM results r JOIN tasks t ON t.task_id = r.task_id "
        "WHERE r.run_id = ? ORDER BY t.ordinal",
        (run_id,),
    ).fetchall()
    return results_from(rows)


def state_counts(conn: sqlite3.Connection) -> StateCounts:
    """Runs, tasks and subtasks by state, over every tenant (the metrics endpoint)."""
    runs = conn.execute("SELECT state, COUNT(*) FROM runs GROUP BY state").fetchall()
    tasks = conn.execute("SELECT state, COUNT(*) FROM tasks GROUP BY state").fetchall()
    sums = conn.execute(
        "SELECT " + ", ".join(f"COALESCE(SUM({c}), 0)" for c in STATE_COLUMNS) + " FROM tasks"
    ).fetchone()
    return state_counts_from(runs, tasks, sums)
