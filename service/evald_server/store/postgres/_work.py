"""The hot path on PostgreSQL: claims under the owner's lease and owner-guarded outcomes.

A claim moves a page of ready subtasks of one (run, model) to ``running`` with
``FOR UPDATE SKIP LOCKED``, stamped with the claiming owner and the claim's token. The
owner's lease is its membership row (``_leases``): while it heartbeats, its rows are
its own; once its lease has expired any replica may give them back to pending.

Outcomes are owner-guarded: one transaction per batch (the group commit) locks the rows
that are still ``running`` under this owner, updates them by primary key in one
pipelined ``executemany`` and moves the counters (bench/bench_pg_driver.py measured
this form at ~2 ms per 256 outcomes; one ``UPDATE … FROM unnest(…)`` planned a nested
filter join, 9–19 ms). A row that a cancel, a restart or another replica took back is
skipped, so a replica that lost its lease cannot overwrite work redone elsewhere.
"""

import json
from collections.abc import Sequence
from typing import Any

import asyncpg

from evald_server.domain import RunState
from evald_server.store._claims import (
    claimable,
    claimed_subtasks,
    count_claim,
    judged_row_ids,
    wanted_records,
)
from evald_server.store._outcomes import plan_outcomes
from evald_server.store._plans import CounterDeltas, failure_event, group_by_run, state_event
from evald_server.store._records import Claim, CompletionReport, EventRow, Json, SubtaskOutcome
from evald_server.store._rows import CLAIMED_COLUMNS, FAILURE_COLUMNS, SUBTASKS_FROM
from evald_server.store.postgres._common import (
    WORK,
    append_events,
    apply_deltas,
    clean_text,
    create_judge_subtasks,
    finish_ready_tasks,
    lock_runs,
    notice,
    notify,
)

_RETURNING = f"RETURNING {CLAIMED_COLUMNS}"

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
    f"SELECT {CLAIMED_COLUMNS} FROM subtasks "
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
                picked: list[Any] = sorted(tuple(r) for r in done)
                return await _claim(conn, run_id, model_id, picked, False, None, ())
        runs = await lock_runs(conn, [run_id])
        run = runs.get(run_id)
        if run is None or not claimable(run["state"], run["cancel_requested"]):
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
        count_claim(deltas, run_id, retries, pending)
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
    """The claim with its records and the answers its judge subtasks grade, read after
    the commit (records never change, nor does a succeeded answer)."""
    records = await _records(conn, run_id, picked)
    answers = await _judged_answers(conn, judged_row_ids(picked))
    return Claim(
        subtasks=claimed_subtasks(run_id, model_id, picked, records, answers),
        exhausted=exhausted,
        next_retry_at=next_retry_at,
        events=tuple(events),
    )


async def _judged_answers(conn: asyncpg.Connection, row_ids: list[int]) -> dict[int, str]:
    """The answers that claimed judge subtasks grade, by their row id."""
    if not row_ids:
        return {}
    rows = await conn.fetch(
        "SELECT row_id, output FROM subtasks WHERE row_id = ANY($1::bigint[])", row_ids
    )
    return {r[0]: r[1] or "" for r in rows}


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
    found: dict[tuple[str, int], tuple[str, str, Json]] = {}
    for task_id, idxs in wanted_records(picked).items():
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


_UPDATE_OUTCOME = (
    "UPDATE subtasks SET state = $1, owner = NULL, claim_token = NULL, updated_at = $2, "
    "attempt = attempt + $3, requests = requests + $4, rate_limited = rate_limited + $5, "
    "call_time_s = call_time_s + $6, next_attempt_at = $7, "
    "output = COALESCE($8, output), prompt_tokens = COALESCE($9, prompt_tokens), "
    "completion_tokens = COALESCE($10, completion_tokens), "
    "latency_s = COALESCE($11, latency_s), ttft_s = COALESCE($12, ttft_s), "
    "first_error = COALESCE(first_error, $13), last_error = COALESCE($14, last_error), "
    "top_logprobs = COALESCE($15, top_logprobs), finish_reason = COALESCE($16, finish_reason), "
    "failed_rate_limited = failed_rate_limited + $17, failed_timeout = failed_timeout + $18, "
    "failed_transient = failed_transient + $19, cost_picousd = COALESCE($20, cost_picousd), "
    "cost_tokens = COALESCE($21, cost_tokens), cost_estimated = cost_estimated OR $22, "
    "verdict = COALESCE($23, verdict), cache_hit = $24, "
    "answer_flags = COALESCE($25, answer_flags) WHERE row_id = $26"
)
_ADD_RUN_COST = (
    "UPDATE runs SET cost_picousd = cost_picousd + $1, cost_tokens = cost_tokens + $2, "
    "cost_estimated = cost_estimated OR $3 WHERE run_id = $4"
)
_FAILED = f"SELECT {FAILURE_COLUMNS} {SUBTASKS_FROM} WHERE s.row_id = $1"


async def record_outcomes(
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
        plan = plan_outcomes(outcomes, owned, cancelling, now)
        if plan.updates:  # PostgreSQL text holds no NUL
            texts = ((u, clean_text(u.output), clean_text(u.finish_reason)) for u in plan.updates)
            await conn.executemany(
                _UPDATE_OUTCOME,
                [u._replace(output=out, finish_reason=why) for u, out, why in texts],
            )
        if plan.run_costs:
            await conn.executemany(_ADD_RUN_COST, plan.cost_values())
        # Judge rows in this transaction, under the run locks taken above.
        judges = await create_judge_subtasks(conn, plan.answers, plan.deltas, now, cancelling)
        await apply_deltas(conn, plan.deltas)
        finished = await finish_ready_tasks(conn, list(plan.deltas.tasks), now)
        failures = [
            (o.run_id, failure_event(o, await conn.fetchrow(_FAILED, o.row_id), now))
            for o in plan.failures
        ]
        appended: list[EventRow] = []
        for run_id, events in group_by_run(failures).items():
            appended.extend(await append_events(conn, run_id, events, retain, owner))
        # Work back to pending (released by a drain) or waiting for a retry: any replica
        # may take it, this one may be stopping or die before it falls due.
        again = sorted(plan.rework | {run_id for run_id, _ in judges.work})
        await notify(conn, [notice(WORK, owner, run_id) for run_id in again])
    return plan.report(finished, appended, judges.work)
