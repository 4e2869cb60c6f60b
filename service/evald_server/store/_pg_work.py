"""The hot path on PostgreSQL: claims under the owner's lease and owner-guarded outcomes.

A claim moves a page of ready subtasks of one (run, model) to ``running`` with
``FOR UPDATE SKIP LOCKED``, stamped with the claiming owner and the claim's token. The
owner's lease is its membership row (``_pg_leases``): while it heartbeats, its rows are
its own; once its lease has expired any replica may give them back to pending.

Outcomes are owner-guarded: one transaction per batch (the group commit) locks the rows
that are still ``running`` under this owner, updates them by primary key in one
pipelined ``executemany`` and moves the counters (bench/bench_pg_driver.py measured
this form at ~2 ms per 256 outcomes; one ``UPDATE … FROM unnest(…)`` planned a nested
filter join, 9–19 ms). A row that a cancel, a restart or another replica took back is
skipped, so a replica that lost its lease cannot overwrite work redone elsewhere.
"""

import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import asyncpg

from evald_server.domain import (
    OUTCOME_TARGET,
    Counters,
    EventKind,
    OutcomeKind,
    RunState,
    SampleFailure,
    SubtaskState,
    TaskState,
    effective_outcome,
    spends_attempt,
    task_ready_for_scoring,
    to_jsonable,
)
from evald_server.store._pg_common import (
    WORK,
    append_events,
    apply_deltas,
    clean_text,
    count_moves,
    lock_runs,
    notice,
    notify,
)
from evald_server.store._records import (
    COUNTER_COLUMNS,
    Claim,
    ClaimedSubtask,
    CompletionReport,
    EventRow,
    Json,
    NewEvent,
    RetryScheduled,
    SubtaskOutcome,
    subtask_public_id,
)
from evald_server.store._sql_common import CounterDeltas, dumps, error_json, state_event

_S = SubtaskState
_RETURNING = "RETURNING row_id, task_id, record_idx, repeat_index, attempt"

_CLAIM_RETRIES = (
    "UPDATE subtasks SET state = 'running', owner = $1, claim_token = $2, updated_at = $3 "
    "WHERE row_id IN (SELECT row_id FROM subtasks WHERE run_id = $4 AND model_id = $5 "
    "AND state = 'failed' AND next_attempt_at <= $3 ORDER BY next_attempt_at LIMIT $6 "
    f"FOR UPDATE SKIP LOCKED) {_RETURNING}"
)
# Keyset order on the partial index (run_id, model_id, row_id): the claim reads exactly
# the rows it takes (bench_pg_driver: claims measured flat in the table's size this way).
_CLAIM_PENDING = (
    "UPDATE subtasks SET state = 'running', owner = $1, claim_token = $2, updated_at = $3 "
    "WHERE row_id IN (SELECT row_id FROM subtasks WHERE run_id = $4 AND model_id = $5 "
    "AND state = 'pending' ORDER BY row_id LIMIT $6 FOR UPDATE SKIP LOCKED) "
    f"{_RETURNING}"
)
_CLAIMED_BY_TOKEN = (
    "SELECT row_id, task_id, record_idx, repeat_index, attempt FROM subtasks "
    "WHERE claim_token = $1 AND owner = $2 AND state = 'running' AND run_id = $3"
)


async def claim_ready(
    conn: asyncpg.Connection,
    run_id: str,
    model_id: str,
    limit: int,
    owner: str,
    token: str,
    now: float,
    retain: int,
    *,
    again: bool,
) -> Claim:
    """Move up to ``limit`` ready subtasks of (run, model) to ``running`` for ``owner``:
    due retries first, then pending work in run order. ``again``: a retry after a lost
    connection, which first looks for the rows an unacknowledged commit claimed."""
    events: list[EventRow] = []
    async with conn.transaction():
        if again:
            done = await conn.fetch(_CLAIMED_BY_TOKEN, token, owner, run_id)
            if done:
                picked: list[Any] = sorted(done)
                return await _claim(conn, run_id, model_id, picked, False, None, ())
        runs = await lock_runs(conn, [run_id])
        run = runs.get(run_id)
        if run is None or run["cancel_requested"] or RunState(run["state"]).is_terminal:
            return Claim(subtasks=(), exhausted=True, next_retry_at=None)
        retries = await conn.fetch(_CLAIM_RETRIES, owner, token, now, run_id, model_id, limit)
        want = limit - len(retries)
        pending = []
        if want > 0:
            pending = await conn.fetch(_CLAIM_PENDING, owner, token, now, run_id, model_id, want)
        exhausted = len(pending) < want
        next_retry_at = None
        if exhausted:
            next_retry_at = await conn.fetchval(
                "SELECT MIN(next_attempt_at) FROM subtasks WHERE run_id = $1 AND model_id = $2 "
                "AND state = 'failed'",
                run_id,
                model_id,
            )
        if not retries and not pending:
            return Claim(subtasks=(), exhausted=exhausted, next_retry_at=next_retry_at)
        deltas = CounterDeltas()
        count_moves(deltas, run_id, (r["task_id"] for r in retries), _S.FAILED, _S.RUNNING)
        count_moves(deltas, run_id, (r["task_id"] for r in pending), _S.PENDING, _S.RUNNING)
        await apply_deltas(conn, deltas)
        await conn.execute(
            "UPDATE tasks SET state = 'running', started_at = $1 "
            "WHERE task_id = ANY($2::text[]) AND state = 'pending'",
            now,
            sorted(deltas.tasks),
        )
        if RunState(run["state"]) is RunState.PENDING:
            await conn.execute(
                "UPDATE runs SET state = 'running', started_at = $2 WHERE run_id = $1",
                run_id,
                now,
            )
            event = state_event(RunState.RUNNING, now, RunState.PENDING)
            events = await append_events(conn, run_id, [event], retain, owner)
        picked = sorted([tuple(r) for r in retries] + [tuple(r) for r in pending])
    return await _claim(conn, run_id, model_id, picked, exhausted, next_retry_at, events)


async def _claim(
    conn: asyncpg.Connection,
    run_id: str,
    model_id: str,
    picked: list[Any],
    exhausted: bool,
    next_retry_at: float | None,
    events: Sequence[EventRow],
) -> Claim:
    """The claim with its records, read after the commit (records never change)."""
    records = await _records(conn, run_id, picked)
    claimed = []
    for row_id, task_id, idx, repeat, attempt in picked:
        dataset_id, record_id, fields = records[task_id, idx]
        claimed.append(
            ClaimedSubtask(
                row_id,
                run_id,
                task_id,
                model_id,
                idx,
                repeat,
                attempt,
                record_id,
                fields,
                dataset_id,
            )
        )
    return Claim(
        subtasks=tuple(claimed),
        exhausted=exhausted,
        next_retry_at=next_retry_at,
        events=tuple(events),
    )


async def _records(
    conn: asyncpg.Connection, run_id: str, picked: list[Any]
) -> dict[tuple[str, int], tuple[str, str, Json]]:
    """(task, record idx) → (dataset id, record id, decoded fields), one decode per record.

    One primary-key probe list per dataset (``dataset_id = $1 AND idx = ANY($2)``): a
    join of the claimed pairs against ``dataset_records`` planned a hash join over the
    whole dataset (16 ms per claim of 64 at 20,000 records, bench_replicas)."""
    datasets = dict(
        await conn.fetch("SELECT task_id, dataset_id FROM tasks WHERE run_id = $1", run_id)
    )
    wanted: defaultdict[str, set[int]] = defaultdict(set)
    for row in picked:
        wanted[row[1]].add(row[2])
    found: dict[tuple[str, int], tuple[str, str, Json]] = {}
    for task_id, idxs in wanted.items():
        dataset_id = datasets[task_id]
        rows = await conn.fetch(
            "SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = $1 "
            "AND idx = ANY($2::int[])",
            dataset_id,
            sorted(idxs),
        )
        for idx, record_id, fields in rows:
            found[task_id, idx] = (dataset_id, record_id, json.loads(fields))
    return found


_TARGET_VALUE = {kind: state.value for kind, state in OUTCOME_TARGET.items()}
_TERMINAL = frozenset(s for s in _S if s.is_terminal)

_UPDATE_OUTCOME = (
    "UPDATE subtasks SET state = $1, owner = NULL, claim_token = NULL, updated_at = $2, "
    "attempt = attempt + $3, requests = requests + $4, rate_limited = rate_limited + $5, "
    "call_time_s = call_time_s + $6, next_attempt_at = $7, "
    "output = COALESCE($8, output), prompt_tokens = COALESCE($9, prompt_tokens), "
    "completion_tokens = COALESCE($10, completion_tokens), "
    "latency_s = COALESCE($11, latency_s), ttft_s = COALESCE($12, ttft_s), "
    "first_error = COALESCE(first_error, $13), last_error = COALESCE($14, last_error), "
    "top_logprobs = COALESCE($15, top_logprobs), finish_reason = COALESCE($16, finish_reason) "
    "WHERE row_id = $17"
)


async def complete(
    conn: asyncpg.Connection,
    outcomes: Sequence[SubtaskOutcome],
    owner: str,
    now: float,
    retain: int,
) -> CompletionReport:
    """Record a batch of outcomes in one transaction (the group commit)."""
    async with conn.transaction():
        runs = await lock_runs(conn, (o.run_id for o in outcomes))
        cancelling = {run_id for run_id, r in runs.items() if r["cancel_requested"]}
        owned = {
            r[0]
            for r in await conn.fetch(
                "SELECT row_id FROM subtasks WHERE row_id = ANY($1::bigint[]) "
                "AND state = 'running' AND owner = $2",
                [o.row_id for o in outcomes],
                owner,
            )
        }
        moved: defaultdict[tuple[str, str, SubtaskState], int] = defaultdict(int)
        retries: list[RetryScheduled] = []
        completed: dict[str, int] = {}
        failures: list[SubtaskOutcome] = []
        updates = []
        for outcome in outcomes:
            if outcome.row_id not in owned:
                continue  # taken back by a cancel, a restart or another replica
            kind = effective_outcome(outcome.kind, cancel_requested=outcome.run_id in cancelling)
            target = OUTCOME_TARGET[kind]
            error = error_json(outcome.error)
            updates.append(
                (
                    _TARGET_VALUE[kind],
                    now,
                    int(spends_attempt(kind, attempted=outcome.attempted)),
                    int(outcome.attempted),
                    int(outcome.rate_limited),
                    outcome.call_time_s,
                    outcome.next_attempt_at if kind is OutcomeKind.RETRY else None,
                    clean_text(outcome.output),
                    outcome.prompt_tokens,
                    outcome.completion_tokens,
                    outcome.latency_s,
                    outcome.ttft_s,
                    error,
                    error,
                    None if outcome.top_logprobs is None else dumps(outcome.top_logprobs),
                    clean_text(outcome.finish_reason),
                    outcome.row_id,
                )
            )
            moved[outcome.run_id, outcome.task_id, target] += 1
            if target in _TERMINAL:
                completed[outcome.run_id] = completed.get(outcome.run_id, 0) + 1
            if kind is OutcomeKind.RETRY and outcome.next_attempt_at is not None:
                retries.append(
                    RetryScheduled(outcome.run_id, outcome.model_id, outcome.next_attempt_at)
                )
            if kind is OutcomeKind.FAILED_PERMANENT and outcome.error is not None:
                failures.append(outcome)
        if updates:
            await conn.executemany(_UPDATE_OUTCOME, updates)
        deltas = CounterDeltas()
        for (run_id, task_id, target), count in moved.items():
            deltas.move(run_id, task_id, _S.RUNNING, target, count)
        await apply_deltas(conn, deltas)
        finished = await finish_ready_tasks(conn, list(deltas.tasks), now)
        by_run: defaultdict[str, list[NewEvent]] = defaultdict(list)
        for failure in failures:
            by_run[failure.run_id].append(await _failure_event(conn, failure, now))
        appended: list[EventRow] = []
        for run_id in sorted(by_run):
            appended.extend(await append_events(conn, run_id, by_run[run_id], retain, owner))
        # Work back to pending (released by a drain) or waiting for a retry: any replica
        # may take it, this one may be stopping or die before it falls due.
        again = sorted({r for r, _, t in moved if t in (_S.PENDING, _S.FAILED)})
        await notify(conn, [notice(WORK, owner, run_id) for run_id in again])
    return CompletionReport(
        applied=len(updates),
        finished_tasks=tuple(finished),
        retries=tuple(retries),
        completed_per_run=completed,
        events=tuple(appended),
    )


async def _failure_event(conn: asyncpg.Connection, outcome: SubtaskOutcome, now: float) -> NewEvent:
    assert outcome.error is not None
    row = await conn.fetchrow(
        "SELECT s.requests, r.record_id FROM subtasks s JOIN tasks t ON t.task_id = s.task_id "
        "JOIN dataset_records r ON r.dataset_id = t.dataset_id AND r.idx = s.record_idx "
        "WHERE s.row_id = $1",
        outcome.row_id,
    )
    failure = SampleFailure(
        subtask_id=subtask_public_id(outcome.task_id, outcome.record_idx, outcome.repeat_index),
        task_id=outcome.task_id,
        model_id=outcome.model_id,
        record_id=row["record_id"],
        record_idx=outcome.record_idx,
        repeat_index=outcome.repeat_index,
        attempts=row["requests"],
        error=outcome.error,
    )
    return NewEvent(kind=EventKind.SAMPLE_FAILED, payload=to_jsonable(failure), time=now)


async def finish_ready_tasks(
    conn: asyncpg.Connection, task_ids: Sequence[str], now: float
) -> list[str]:
    """Move tasks whose inference is finished to ``scoring``; return their ids."""
    if not task_ids:
        return []
    rows = await conn.fetch(
        f"SELECT task_id, state, {', '.join(COUNTER_COLUMNS)} FROM tasks "
        "WHERE task_id = ANY($1::text[]) ORDER BY task_id",
        sorted(task_ids),
    )
    finished = [
        r["task_id"]
        for r in rows
        if task_ready_for_scoring(TaskState(r["state"]), Counters(*tuple(r)[2:]))
    ]
    if finished:
        await conn.execute(
            "UPDATE tasks SET state = 'scoring', finished_at = $1, scorer = NULL "
            "WHERE task_id = ANY($2::text[])",
            now,
            finished,
        )
    return finished
