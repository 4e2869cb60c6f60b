"""Read-only queries; they run on reader threads and never block the writer (WAL)."""

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from evald_server.domain import Cost, Counters, EventKind, RetryCounts, SubtaskPhase, SubtaskState
from evald_server.store._records import (
    COUNTER_COLUMNS,
    EventRow,
    Json,
    JudgeVerdictRow,
    ProfileInputs,
    RunRow,
    SubtaskRow,
    TaskOutput,
    TaskRow,
)
from evald_server.store._sql_common import (
    RUN_COLUMNS,
    TASK_COLUMNS,
    TASKS_FROM,
    error_from,
    loads_json,
    read_run,
    run_from,
    task_from,
)


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
    sql = f"SELECT {RUN_COLUMNS} FROM runs WHERE tenant = ?"
    params: list[Any] = [tenant]
    if states:
        sql += f" AND state IN ({','.join('?' * len(states))})"
        params.extend(states)
    if after is not None:
        sql += " AND (created_at, run_id) < (?, ?)"
        params.extend(after)
    sql += " ORDER BY created_at DESC, run_id DESC LIMIT ?"
    params.append(limit)
    return [_with_oldest(conn, row) for row in conn.execute(sql, params).fetchall()]


def _with_oldest(conn: sqlite3.Connection, row: tuple[Any, ...]) -> RunRow:
    oldest = conn.execute("SELECT MIN(seq) FROM events WHERE run_id = ?", (row[0],)).fetchone()[0]
    last_seq = int(row[9 + len(COUNTER_COLUMNS)])
    return run_from(row, int(oldest) if oldest is not None else last_seq + 1)


def find_run_by_request(conn: sqlite3.Connection, tenant: str, request_id: str) -> RunRow | None:
    row = conn.execute(
        "SELECT run_id FROM runs WHERE tenant = ? AND request_id = ?", (tenant, request_id)
    ).fetchone()
    return None if row is None else read_run(conn, row[0])


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
    return [
        EventRow(run_id=run_id, seq=r[0], time=r[1], kind=EventKind(r[2]), payload=json.loads(r[3]))
        for r in rows
    ]


_SUBTASK_COLUMNS = (
    "s.row_id, s.task_id, s.record_idx, s.repeat_index, s.state, s.attempt, s.requests, "
    "s.rate_limited, s.next_attempt_at, s.output, s.prompt_tokens, s.completion_tokens, "
    "s.latency_s, s.ttft_s, s.call_time_s, s.first_error, s.last_error, r.record_id, r.fields, "
    "s.scores, s.correct, s.updated_at, s.run_id, s.model_id, s.finish_reason, "
    "s.failed_rate_limited, s.failed_timeout, s.failed_transient, s.cost_picousd, s.cost_tokens, "
    "s.cost_estimated, s.phase, s.judge_round, s.verdict, s.judgement, s.cache_hit, "
    "s.answer_flags"
)
_COLUMN_COUNT = 37  # of _SUBTASK_COLUMNS; a cut output's full size follows them


def _cost_from(pico: int | None, tokens: int | None, estimated: int) -> Cost | None:
    if tokens is None:
        return None  # no success yet (or stored before evald counted cost)
    return Cost(
        picousd=pico or 0, tokens=int(tokens), estimated=bool(estimated), priced=pico is not None
    )


def _subtask_from(row: tuple[Any, ...]) -> SubtaskRow:
    scored = loads_json(row[19])
    return SubtaskRow(
        row_id=row[0],
        task_id=row[1],
        record_idx=row[2],
        repeat_index=row[3],
        state=SubtaskState(row[4]),
        attempt=row[5],
        requests=row[6],
        rate_limited=row[7],
        next_attempt_at=row[8],
        output=row[9],
        prompt_tokens=row[10],
        completion_tokens=row[11],
        latency_s=row[12],
        ttft_s=row[13],
        call_time_s=row[14],
        first_error=error_from(row[15]),
        last_error=error_from(row[16]),
        record_id=row[17],
        fields=json.loads(row[18]),
        scores=None if scored is None else {k: float(v) for k, v in scored["scores"].items()},
        flags=() if scored is None else tuple(scored.get("flags", ())),
        correct=None if row[20] is None else bool(row[20]),
        updated_at=row[21],
        run_id=row[22],
        model_id=row[23],
        finish_reason=row[24],
        failures=RetryCounts(row[25], row[26], row[27]),
        cost=_cost_from(row[28], row[29], row[30]),
        phase=SubtaskPhase(row[31]),
        judge_round=row[32],
        verdict=row[33],
        judgement=loads_json(row[34]),
        cache_hit=bool(row[35]),
        answer_flags=() if row[36] is None else tuple(json.loads(row[36])),
        output_bytes=row[_COLUMN_COUNT] if len(row) > _COLUMN_COUNT else None,
    )


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
    columns = _SUBTASK_COLUMNS
    if output_chars is not None:
        cut = f"substr(s.output, 1, {int(output_chars)})"
        columns = columns.replace("s.output,", f"{cut},", 1)
        columns += ", length(CAST(s.output AS BLOB))"
    sql = (
        f"SELECT {columns} FROM subtasks s JOIN tasks t ON t.task_id = s.task_id "
        "JOIN dataset_records r ON r.dataset_id = t.dataset_id AND r.idx = s.record_idx "
        f"WHERE {where} AND s.row_id > ?"
    )
    params = [*params, after_row]
    if states:
        sql += f" AND s.state IN ({','.join('?' * len(states))})"
        params.extend(s.value for s in states)
    sql += " ORDER BY s.row_id LIMIT ?"
    params.append(limit)
    return [_subtask_from(row) for row in conn.execute(sql, params).fetchall()]


def task_outputs(
    conn: sqlite3.Connection, task_id: str, after_row: int, limit: int
) -> list[TaskOutput]:
    """One page of a task's succeeded outputs with their records, in order. Lean on
    purpose: scoring reads every output of a task, 100,000 of them for a large one, and
    the records stay JSON text (the scoring worker decodes them)."""
    rows = conn.execute(
        "SELECT s.row_id, s.record_idx, s.repeat_index, r.record_id, r.fields, s.output, "
        "s.top_logprobs FROM subtasks s JOIN tasks t ON t.task_id = s.task_id "
        "JOIN dataset_records r ON r.dataset_id = t.dataset_id AND r.idx = s.record_idx "
        "WHERE s.task_id = ? AND s.row_id > ? AND s.state = 'succeeded' AND s.phase = 0 "
        "ORDER BY s.row_id LIMIT ?",
        (task_id, after_row, limit),
    ).fetchall()
    outputs = []
    last_idx, last_fields = -1, ""
    for row_id, idx, repeat, record_id, fields, output, logprobs in rows:
        if idx != last_idx:  # the repeats of a record are adjacent: one copy of its text
            last_idx, last_fields = idx, fields
        top = None if logprobs is None else tuple((t, float(p)) for t, p in json.loads(logprobs))
        outputs.append(TaskOutput(row_id, idx, repeat, record_id, last_fields, output or "", top))
    return outputs


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
    counts = dict(conn.execute(sql + " GROUP BY state", params).fetchall())
    values = {c: int(counts.get(c, 0)) for c in COUNTER_COLUMNS if c != "total"}
    return Counters(total=sum(values.values()), **values)


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
    return [
        JudgeVerdictRow(r[0], r[1], r[2], r[3], SubtaskState(r[4]), r[5], r[6], r[7]) for r in rows
    ]


def read_results(conn: sqlite3.Connection, run_id: str) -> list[tuple[str, Json]]:
    rows = conn.execute(
        "SELECT r.task_id, r.result FROM results r JOIN tasks t ON t.task_id = r.task_id "
        "WHERE r.run_id = ? ORDER BY t.ordinal",
        (run_id,),
    ).fetchall()
    return [(r[0], json.loads(r[1])) for r in rows]
