"""Reads and datasets on PostgreSQL; rows map to the same records as SQLite's."""

import json
from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

from evald_server.domain import Counters, EventKind, SubtaskPhase, SubtaskState, TaskType
from evald_server.store._pg_common import run_with_oldest
from evald_server.store._records import (
    COUNTER_COLUMNS,
    DatasetRow,
    EventRow,
    Json,
    JudgeVerdictRow,
    ProfileInputs,
    RecordRow,
    RunRow,
    StateCounts,
    SubtaskRow,
    TaskOutput,
    TaskRow,
)
from evald_server.store._sql_common import RUN_COLUMNS, TASK_COLUMNS, TASKS_FROM, dumps, task_from
from evald_server.store._sql_datasets import _COLUMNS as DATASET_COLUMNS
from evald_server.store._sql_datasets import _dataset_from
from evald_server.store._sql_reads import _SUBTASK_COLUMNS, _subtask_from

_OLDEST = "(SELECT MIN(seq) FROM events e WHERE e.run_id = r.run_id)"

# Datasets -------------------------------------------------------------------------------

_DS_COLUMNS = DATASET_COLUMNS


async def create_dataset(
    conn: asyncpg.Connection, dataset: DatasetRow, records: Iterable[RecordRow]
) -> tuple[DatasetRow, bool]:
    """Insert the dataset and its records (``COPY``) unless (tenant, name, version) or
    (tenant, request_id) exists; concurrent uploads of one name are ordered by an
    advisory lock, so the second finds the first."""
    async with conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext($1))", f"dataset:{dataset.tenant}"
        )
        existing = await _find_existing(conn, dataset)
        if existing is not None:
            return existing, False
        await conn.execute(
            f"INSERT INTO datasets ({_DS_COLUMNS}) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            dataset.dataset_id,
            dataset.tenant,
            dataset.name,
            dataset.benchmark_version,
            dataset.task_type.value,
            dataset.content_sha256,
            dataset.record_count,
            dataset.prompt_template,
            dataset.created_at,
            dataset.request_id,
            dataset.request_hash,
            dataset.size_bytes,
            None if dataset.prompt_options is None else dumps(dataset.prompt_options),
        )
        await conn.copy_records_to_table(
            "dataset_records",
            records=((dataset.dataset_id, r.idx, r.record_id, dumps(r.fields)) for r in records),
            columns=("dataset_id", "idx", "record_id", "fields"),
        )
    return dataset, True


async def _find_existing(conn: asyncpg.Connection, dataset: DatasetRow) -> DatasetRow | None:
    if dataset.request_id is not None:
        row = await conn.fetchrow(
            f"SELECT {_DS_COLUMNS} FROM datasets WHERE tenant = $1 AND request_id = $2",
            dataset.tenant,
            dataset.request_id,
        )
        if row is not None:
            return _dataset_from(row)
    return await find_dataset(conn, dataset.tenant, dataset.name, dataset.benchmark_version)


async def find_dataset(
    conn: asyncpg.Connection, tenant: str, name: str, version: str
) -> DatasetRow | None:
    row = await conn.fetchrow(
        f"SELECT {_DS_COLUMNS} FROM datasets WHERE tenant = $1 AND name = $2 "
        "AND benchmark_version = $3",
        tenant,
        name,
        version,
    )
    return None if row is None else _dataset_from(row)


async def get_dataset(conn: asyncpg.Connection, dataset_id: str) -> DatasetRow | None:
    row = await conn.fetchrow(
        f"SELECT {_DS_COLUMNS} FROM datasets WHERE dataset_id = $1", dataset_id
    )
    return None if row is None else _dataset_from(row)


async def list_datasets(
    conn: asyncpg.Connection,
    tenant: str,
    name: str | None,
    task_type: TaskType | None,
    after: tuple[float, str] | None,
    limit: int,
) -> list[DatasetRow]:
    """Newest first, keyset-paginated on (created_at, dataset_id)."""
    sql = f"SELECT {_DS_COLUMNS} FROM datasets WHERE tenant = $1"
    params: list[Any] = [tenant]
    if name:
        params.append(name)
        sql += f" AND name = ${len(params)}"
    if task_type is not None:
        params.append(task_type.value)
        sql += f" AND task_type = ${len(params)}"
    if after is not None:
        params.extend(after)
        sql += f" AND (created_at, dataset_id) < (${len(params) - 1}, ${len(params)})"
    params.append(limit)
    sql += f" ORDER BY created_at DESC, dataset_id DESC LIMIT ${len(params)}"
    return [_dataset_from(row) for row in await conn.fetch(sql, *params)]


async def read_records(
    conn: asyncpg.Connection, dataset_id: str, idxs: Sequence[int]
) -> list[RecordRow]:
    rows = await conn.fetch(
        "SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = $1 "
        "AND idx = ANY($2::int[]) ORDER BY idx",
        dataset_id,
        list(idxs),
    )
    return [RecordRow(idx=r[0], record_id=r[1], fields=json.loads(r[2])) for r in rows]


# Runs and tasks -------------------------------------------------------------------------


async def list_runs(
    conn: asyncpg.Connection,
    tenant: str,
    states: Sequence[str],
    after: tuple[float, str] | None,
    limit: int,
) -> list[RunRow]:
    """Newest first, keyset-paginated on (created_at, run_id)."""
    sql = f"SELECT {RUN_COLUMNS}, {_OLDEST} FROM runs r WHERE tenant = $1"
    params: list[Any] = [tenant]
    if states:
        params.append(list(states))
        sql += f" AND state = ANY(${len(params)}::text[])"
    if after is not None:
        params.extend(after)
        sql += f" AND (created_at, run_id) < (${len(params) - 1}, ${len(params)})"
    params.append(limit)
    sql += f" ORDER BY created_at DESC, run_id DESC LIMIT ${len(params)}"
    return [run_with_oldest(row) for row in await conn.fetch(sql, *params)]


async def find_run_by_request(
    conn: asyncpg.Connection, tenant: str, request_id: str
) -> RunRow | None:
    row = await conn.fetchrow(
        f"SELECT {RUN_COLUMNS}, {_OLDEST} FROM runs r WHERE tenant = $1 AND request_id = $2",
        tenant,
        request_id,
    )
    return None if row is None else run_with_oldest(row)


async def live_run_ids(conn: asyncpg.Connection) -> list[str]:
    rows = await conn.fetch(
        "SELECT run_id FROM runs WHERE state IN ('pending', 'running') ORDER BY created_at"
    )
    return [r[0] for r in rows]


async def get_tasks(conn: asyncpg.Connection, run_id: str) -> list[TaskRow]:
    rows = await conn.fetch(
        f"SELECT {TASK_COLUMNS} {TASKS_FROM} WHERE t.run_id = $1 ORDER BY t.ordinal", run_id
    )
    return [task_from(tuple(row)) for row in rows]


async def get_task(conn: asyncpg.Connection, task_id: str) -> TaskRow | None:
    row = await conn.fetchrow(f"SELECT {TASK_COLUMNS} {TASKS_FROM} WHERE t.task_id = $1", task_id)
    return None if row is None else task_from(tuple(row))


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
    return [
        EventRow(run_id=run_id, seq=r[0], time=r[1], kind=EventKind(r[2]), payload=json.loads(r[3]))
        for r in rows
    ]


# Subtasks, scoring inputs, results ------------------------------------------------------


async def subtasks(
    conn: asyncpg.Connection,
    where: str,
    params: list[Any],
    states: Sequence[SubtaskState],
    after_row: int,
    limit: int,
    output_chars: int | None = None,
) -> list[SubtaskRow]:
    """One page of subtasks matching ``where`` (``$n`` placeholders for ``params``)."""
    columns = _SUBTASK_COLUMNS
    if output_chars is not None:
        columns = columns.replace("s.output,", f"substr(s.output, 1, {int(output_chars)}),", 1)
        columns += ", octet_length(s.output)"
    params = [*params, after_row]
    sql = (
        f"SELECT {columns} FROM subtasks s JOIN tasks t ON t.task_id = s.task_id "
        "JOIN dataset_records r ON r.dataset_id = t.dataset_id AND r.idx = s.record_idx "
        f"WHERE {where} AND s.row_id > ${len(params)}"
    )
    if states:
        params.append([s.value for s in states])
        sql += f" AND s.state = ANY(${len(params)}::text[])"
    params.append(limit)
    sql += f" ORDER BY s.row_id LIMIT ${len(params)}"
    return [_subtask_from(tuple(row)) for row in await conn.fetch(sql, *params)]


async def task_outputs(
    conn: asyncpg.Connection, task_id: str, after_row: int, limit: int
) -> list[TaskOutput]:
    rows = await conn.fetch(
        "SELECT s.row_id, s.record_idx, s.repeat_index, r.record_id, r.fields, s.output, "
        "s.top_logprobs FROM subtasks s JOIN tasks t ON t.task_id = s.task_id "
        "JOIN dataset_records r ON r.dataset_id = t.dataset_id AND r.idx = s.record_idx "
        "WHERE s.task_id = $1 AND s.row_id > $2 AND s.state = 'succeeded' AND s.phase = 0 "
        "ORDER BY s.row_id LIMIT $3",
        task_id,
        after_row,
        limit,
    )
    outputs = []
    last_idx, last_fields = -1, ""
    for row_id, idx, repeat, record_id, fields, output, logprobs in rows:
        if idx != last_idx:
            last_idx, last_fields = idx, fields
        top = None if logprobs is None else tuple((t, float(p)) for t, p in json.loads(logprobs))
        outputs.append(TaskOutput(row_id, idx, repeat, record_id, last_fields, output or "", top))
    return outputs


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
    counts = {r[0]: int(r[1]) for r in rows}
    values = {c: counts.get(c, 0) for c in COUNTER_COLUMNS if c != "total"}
    return Counters(total=sum(values.values()), **values)


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
    return [
        JudgeVerdictRow(r[0], r[1], r[2], r[3], SubtaskState(r[4]), r[5], r[6], r[7]) for r in rows
    ]


async def read_results(conn: asyncpg.Connection, run_id: str) -> list[tuple[str, Json]]:
    rows = await conn.fetch(
        "SELECT r.task_id, r.result FROM results r JOIN tasks t ON t.task_id = r.task_id "
        "WHERE r.run_id = $1 ORDER BY t.ordinal",
        run_id,
    )
    return [(r[0], json.loads(r[1])) for r in rows]


async def state_counts(conn: asyncpg.Connection) -> StateCounts:
    runs = await conn.fetch("SELECT state, COUNT(*) FROM runs GROUP BY state")
    tasks = await conn.fetch("SELECT state, COUNT(*) FROM tasks GROUP BY state")
    states = [c for c in COUNTER_COLUMNS if c != "total"]
    sums = await conn.fetchrow(
        "SELECT " + ", ".join(f"COALESCE(SUM({c}), 0)" for c in states) + " FROM tasks"
    )
    return StateCounts(
        runs={str(r[0]): int(r[1]) for r in runs},
        tasks={str(r[0]): int(r[1]) for r in tasks},
        subtasks={state: int(value) for state, value in zip(states, sums, strict=True)},
    )
