"""Read-only queries on PostgreSQL, on any pooled connection; rows decode to the same
records as SQLite's (``store._rows``)."""

from collections.abc import Sequence
from typing import Any

import asyncpg

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
from evald_server.store.postgres._common import read_run


async def get_run(conn: asyncpg.Connection, run_id: str) -> RunRow | None:
    return await read_run(conn, run_id)


async def list_runs(
    conn: asyncpg.Connection,
    tenant: str,
    states: Sequence[str],
    after: tuple[float, str] | None,
    limit: int,
) -> list[RunRow]:
    """Newest first, keyset-paginated on (created_at, run_id)."""
    sql = f"{RUNS_FROM} WHERE tenant = $1"
    params: list[Any] = [tenant]
    if states:
        params.append(list(states))
        sql += f" AND state = ANY(${len(params)}::text[])"
    if after is not None:
        params.extend(after)
        sql += f" AND (created_at, run_id) < (${len(params) - 1}, ${len(params)})"
    params.append(limit)
    sql += f" ORDER BY created_at DESC, run_id DESC LIMIT ${len(params)}"
    return [run_from(row) for row in await conn.fetch(sql, *params)]


async def find_run_by_request(
    conn: asyncpg.Connection, tenant: str, request_id: str
) -> RunRow | None:
    row = await conn.fetchrow(
        f"{RUNS_FROM} WHERE tenant = $1 AND request_id = $2", tenant, request_id
    )
    return None if row is None else run_from(row)


async def live_run_ids(conn: asyncpg.Connection) -> list[str]:
    rows = await conn.fetch(
        "SELECT run_id FROM runs WHERE state IN ('pending', 'running') ORDER BY created_at"
    )
    return [r[0] for r in rows]


async def get_tasks(conn: asyncpg.Connection, run_id: str) -> list[TaskRow]:
    rows = await conn.fetch(
        f"SELECT {TASK_COLUMNS} {TASKS_FROM} WHERE t.run_id = $1 ORDER BY t.ordinal", run_id
    )
    return [task_from(row) for row in rows]


async def get_task(conn: asyncpg.Connection, task_id: str) -> TaskRow | None:
    row = await conn.fetchrow(f"SELECT {TASK_COLUMNS} {TASKS_FROM} WHERE t.task_id = $1", task_id)
    return None if row is None else task_from(row)


async def scoring_task_ids(conn: asyncpg.Connection) -> list[str]:
    rows = await conn.fetch("SELECT task_id FROM tasks WHERE state = 'scoring' ORDER BY row_id")
    return [r[0] for r in rows]


async def read_events(
    conn: asyncpg.Connection, run_id: str, after_seq: int, limit: int
) -> list[EventRow]:
    rows = await conn.fetch(
        "SELECT seq, time, kind, payload FROM events WHERE run_id = $1 AND seq > $2 "
        "ORDER BY seq LIMIT $3",
        run_id,
        after_seq,
        limit,
    )
    return [event_from(run_id, r) for r in rows]


async def task_subtasks(
    conn: asyncpg.Connection,
    task_id: str,
    states: Sequence[SubtaskState],
    after_row: int,
    limit: int,
    phase: SubtaskPhase = SubtaskPhase.ANSWER,
) -> list[SubtaskRow]:
    """One page of a task's subtasks of one phase (all states when ``states`` is
    empty), in order."""
    return await _subtasks(
        conn, "s.task_id = $1 AND s.phase = $2", [task_id, int(phase)], states, after_row, limit
    )


async def run_subtasks(
    conn: asyncpg.Connection,
    run_id: str,
    task_id: str | None,
    states: Sequence[SubtaskState],
    after_row: int,
    limit: int,
    output_chars: int | None = None,
    phase: SubtaskPhase | None = SubtaskPhase.ANSWER,
) -> list[SubtaskRow]:
    """One page of a run's subtasks of one phase (None: both), optionally of one task, in
    run order; with ``output_chars``, each output cut to that many characters in the
    database and its full byte size read beside it."""
    where = "s.run_id = $1"
    params: list[Any] = [run_id]
    if task_id is not None:
        params.append(task_id)
        where += f" AND s.task_id = ${len(params)}"
    if phase is not None:
        params.append(int(phase))
        where += f" AND s.phase = ${len(params)}"
    return await _subtasks(conn, where, params, states, after_row, limit, output_chars)


async def _subtasks(
    conn: asyncpg.Connection,
    where: str,
    params: list[Any],
    states: Sequence[SubtaskState],
    after_row: int,
    limit: int,
    output_chars: int | None = None,
) -> list[SubtaskRow]:
    """One page of subtasks matching ``where`` (``$n`` placeholders for ``params``)."""
    columns = SUBTASK_COLUMNS
    if output_chars is not None:
        columns = columns.replace("s.output,", f"substr(s.output, 1, {int(output_chars)}),", 1)
        columns += ", octet_length(s.output)"
    params = [*params, after_row]
    sql = f"SELECT {columns} {SUBTASKS_FROM} WHERE {where} AND s.row_id > ${len(params)}"
    if states:
        params.append([s.value for s in states])
        sql += f" AND s.state = ANY(${len(params)}::text[])"
    params.append(limit)
    sql += f" ORDER BY s.row_id LIMIT ${len(params)}"
    return [subtask_from(row) for row in await conn.fetch(sql, *params)]


async def task_outputs(
    conn: asyncpg.Connection, task_id: str, after_row: int, limit: int, unexecuted: bool = False
) -> list[TaskOutput]:
    """One page of a task's succeeded answers with their records, in order (only those
    whose program has not run, when ``unexecuted``)."""
    only = " AND s.execution IS NULL" if unexecuted else ""
    rows = await conn.fetch(
        f"SELECT {OUTPUT_COLUMNS} {SUBTASKS_FROM} WHERE s.task_id = $1 AND s.row_id > $2 "
        f"AND s.state = 'succeeded' AND s.phase = 0{only} ORDER BY s.row_id LIMIT $3",
        task_id,
        after_row,
        limit,
    )
    return outputs_from(rows)


async def profile_inputs(
    conn: asyncpg.Connection, task_id: str, phase: SubtaskPhase = SubtaskPhase.ANSWER
) -> ProfileInputs:
    """What one phase's ExecutionProfile is computed from (the answers', or the judge
    calls'); cache hits made no call, so they have no latency and no unknown usage."""
    p = int(phase)
    sums = await conn.fetchrow(
        "SELECT COALESCE(SUM(requests), 0), COALESCE(SUM(GREATEST(requests - 1, 0)), 0), "
        "COALESCE(SUM(rate_limited), 0), COALESCE(SUM(prompt_tokens), 0), "
        "COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(call_time_s), 0), "
        "COALESCE(SUM(cache_hit::int), 0), MAX(updated_at) "
        "FROM subtasks WHERE task_id = $1 AND phase = $2",
        task_id,
        p,
    )
    timings = await conn.fetch(
        "SELECT latency_s, ttft_s FROM subtasks WHERE task_id = $1 AND phase = $2 "
        "AND state = 'succeeded' AND NOT cache_hit ORDER BY row_id",
        task_id,
        p,
    )
    answers = await conn.fetchrow(
        "SELECT COALESCE(SUM((finish_reason = 'length')::int), 0), "
        "COALESCE(SUM((COALESCE(output, '') = '')::int), 0), "
        "COALESCE(SUM((completion_tokens IS NULL AND NOT cache_hit)::int), 0), "
        "COALESCE(SUM(CASE WHEN ttft_s IS NOT NULL AND latency_s > ttft_s "
        "THEN completion_tokens END), 0), "
        "COALESCE(SUM(CASE WHEN ttft_s IS NOT NULL AND latency_s > ttft_s "
        "AND completion_tokens IS NOT NULL THEN latency_s - ttft_s END), 0) "
        "FROM subtasks WHERE task_id = $1 AND phase = $2 AND state = 'succeeded'",
        task_id,
        p,
    )
    task = await get_task(conn, task_id)
    assert task is not None
    cost = await conn.fetchrow(
        "SELECT COALESCE(SUM(cost_picousd), 0), COALESCE(SUM(cost_tokens), 0), "
        "COALESCE(BOOL_OR(cost_estimated), FALSE), COUNT(*) FILTER (WHERE cost_picousd IS NULL) "
        "FROM subtasks WHERE task_id = $1 AND phase = $2 AND state = 'succeeded' "
        "AND cost_tokens IS NOT NULL",
        task_id,
        p,
    )
    reasons = await conn.fetch(
        "SELECT (last_error::json ->> 'reason') AS reason, COUNT(*) AS n FROM subtasks "
        "WHERE task_id = $1 AND phase = $2 AND state = 'failed_permanent' GROUP BY reason "
        "ORDER BY n DESC, reason",
        task_id,
        p,
    )
    return ProfileInputs.from_sums(
        await recount_task(conn, task_id, phase),
        task,
        sums=sums,
        timings=timings,
        answers=answers,
        cost=cost,
        reasons=reasons,
    )


async def recount_task(
    conn: asyncpg.Connection, task_id: str, phase: SubtaskPhase | None = None
) -> Counters:
    """The task's counters recounted from its subtasks (the source of truth): of every
    phase, as the task's counters count them, or of one."""
    sql = "SELECT state, COUNT(*) FROM subtasks WHERE task_id = $1"
    params: list[Any] = [task_id]
    if phase is not None:
        sql += " AND phase = $2"
        params.append(int(phase))
    rows = await conn.fetch(sql + " GROUP BY state", *params)
    return recounted({r[0]: int(r[1]) for r in rows})


async def task_verdicts(
    conn: asyncpg.Connection, task_id: str, after_row: int, limit: int
) -> list[JudgeVerdictRow]:
    """One page of a task's judge subtasks, in answer order then round."""
    rows = await conn.fetch(
        "SELECT row_id, judged_row_id, record_idx, judge_round, state, verdict, output, "
        "(last_error::json ->> 'reason') FROM subtasks "
        "WHERE task_id = $1 AND phase = 1 AND row_id > $2 ORDER BY row_id LIMIT $3",
        task_id,
        after_row,
        limit,
    )
    return [verdict_from(r) for r in rows]


async def read_results(conn: asyncpg.Connection, run_id: str) -> list[tuple[str, Json]]:
    rows = await conn.fetch(
        "SELECT r.task_id, r.result FROM results r JOIN tasks t ON t.task_id = r.task_id "
        "WHERE r.run_id = $1 ORDER BY t.ordinal",
        run_id,
    )
    return results_from(rows)


async def state_counts(conn: asyncpg.Connection) -> StateCounts:
    """Runs, tasks and subtasks by state, over every tenant (the metrics endpoint)."""
    runs = await conn.fetch("SELECT state, COUNT(*) FROM runs GROUP BY state")
    tasks = await conn.fetch("SELECT state, COUNT(*) FROM tasks GROUP BY state")
    sums = await conn.fetchrow(
        "SELECT " + ", ".join(f"COALESCE(SUM({c}), 0)" for c in STATE_COLUMNS) + " FROM tasks"
    )
    return state_counts_from(runs, tasks, sums)
