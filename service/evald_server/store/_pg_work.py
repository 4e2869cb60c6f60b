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
    Cost,
    Counters,
    EventKind,
    OutcomeKind,
    RetryClass,
    RetryCounts,
    RunState,
    SampleFailure,
    SubtaskPhase,
    SubtaskState,
    TaskState,
    effective_outcome,
    judge_subtasks_due,
    spends_attempt,
    task_ready_for_scoring,
    to_jsonable,
)
from evald_server.store._pg_common import (
    NEW_SUBTASK_COLUMNS,
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
_NO_FAILURES = RetryCounts()
_CLAIMED = (
    "row_id, task_id, record_idx, repeat_index, attempt, phase, judge_round, judged_row_id, "
    "failed_rate_limited, failed_timeout, failed_transient"
)
_RETURNING = f"RETURNING {_CLAIMED}"

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
    f"SELECT {_CLAIMED} FROM subtasks "
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
    """The claim with its records and the answers its judge subtasks grade, read after
    the commit (records never change, nor does a succeeded answer)."""
    records = await _records(conn, run_id, picked)
    answers = await _judged_answers(conn, [row[7] for row in picked if row[7] is not None])
    claimed = []
    for row_id, task_id, idx, repeat, attempt, phase, judge_round, judged, *failed in picked:
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
                RetryCounts(*failed) if any(failed) else _NO_FAILURES,
                phase=SubtaskPhase(phase),
                judge_round=judge_round,
                answer=None if judged is None else answers.get(judged, ""),
            )
        )
    return Claim(
        subtasks=tuple(claimed),
        exhausted=exhausted,
        next_retry_at=next_retry_at,
        events=tuple(events),
    )


async def _judged_answers(conn: asyncpg.Connection, row_ids: list[int]) -> dict[int, str]:
    """The answers that claimed judge subtasks grade, by their row id."""
    if not row_ids:
        return {}
    rows = await conn.fetch(
        "SELECT row_id, output FROM subtasks WHERE row_id = ANY($1::bigint[])", sorted(row_ids)
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
    "top_logprobs = COALESCE($15, top_logprobs), finish_reason = COALESCE($16, finish_reason), "
    "failed_rate_limited = failed_rate_limited + $17, failed_timeout = failed_timeout + $18, "
    "failed_transient = failed_transient + $19, cost_picousd = COALESCE($20, cost_picousd), "
    "cost_tokens = COALESCE($21, cost_tokens), cost_estimated = cost_estimated OR $22, "
    "verdict = COALESCE($23, verdict), cache_hit = $24, "
    "answer_flags = COALESCE($25, answer_flags) WHERE row_id = $26"
)
_ADD_RUN_COST = (
    "UPDATE runs SET cost_picousd = cost_picousd + $2, cost_tokens = cost_tokens + $3, "
    "cost_estimated = cost_estimated OR $4 WHERE run_id = $1"
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
        judged: list[SubtaskOutcome] = []
        updates = []
        run_costs: dict[str, Cost] = {}
        for outcome in outcomes:
            if outcome.row_id not in owned:
                continue  # taken back by a cancel, a restart or another replica
            kind = effective_outcome(outcome.kind, cancel_requested=outcome.run_id in cancelling)
            target = OUTCOME_TARGET[kind]
            error = error_json(outcome.error)
            spent = spends_attempt(kind, attempted=outcome.attempted)
            failed = outcome.retry_class if spent else None
            cost = outcome.cost if kind is OutcomeKind.SUCCEEDED else None
            if cost is not None:
                run_costs[outcome.run_id] = run_costs.get(outcome.run_id, Cost()) + cost
            updates.append(
                (
                    _TARGET_VALUE[kind],
                    now,
                    int(spent),
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
                    int(failed is RetryClass.RATE_LIMITED),
                    int(failed is RetryClass.TIMEOUT),
                    int(failed is RetryClass.TRANSIENT),
                    None if cost is None or not cost.priced else cost.picousd,
                    None if cost is None else cost.tokens,
                    cost is not None and cost.estimated,
                    outcome.verdict,
                    outcome.cache_hit and kind is OutcomeKind.SUCCEEDED,
                    dumps(list(outcome.answer_flags)) if outcome.answer_flags else None,
                    outcome.row_id,
                )
            )
            if kind is OutcomeKind.SUCCEEDED and outcome.phase is SubtaskPhase.ANSWER:
                judged.append(outcome)
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
        if run_costs:
            await conn.executemany(
                _ADD_RUN_COST,
                [(r, c.picousd, c.tokens, c.estimated) for r, c in sorted(run_costs.items())],
            )
        deltas = CounterDeltas()
        for (run_id, task_id, target), count in moved.items():
            deltas.move(run_id, task_id, _S.RUNNING, target, count)
        # Judge rows in this transaction, under the run locks taken above.
        judge_work = await _create_judge_subtasks(conn, judged, cancelling, deltas, now)
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
        again = sorted(
            {r for r, _, t in moved if t in (_S.PENDING, _S.FAILED)} | {r for r, _ in judge_work}
        )
        await notify(conn, [notice(WORK, owner, run_id) for run_id in again])
    return CompletionReport(
        applied=len(updates),
        finished_tasks=tuple(finished),
        retries=tuple(retries),
        completed_per_run=completed,
        events=tuple(appended),
        judge_work=tuple(judge_work),
    )


async def _create_judge_subtasks(
    conn: asyncpg.Connection,
    answers: Sequence[SubtaskOutcome],
    cancelling: set[str],
    deltas: CounterDeltas,
    now: float,
) -> list[tuple[str, str]]:
    """Insert the judge subtasks that the succeeded answers call for (pending, counted
    in their task and run); returns the (run, judge model) pairs that got work."""
    if not answers:
        return []
    judges = {
        r[0]: (r[1], int(r[2]))
        for r in await conn.fetch(
            "SELECT task_id, judge_model_id, judge_rounds FROM tasks "
            "WHERE task_id = ANY($1::text[]) AND judge_rounds > 0",
            sorted({o.task_id for o in answers}),
        )
    }
    rows = []
    for outcome in answers:
        model_id, rounds = judges.get(outcome.task_id, (None, 0))
        due = judge_subtasks_due(
            outcome.kind, outcome.phase, rounds, cancel_requested=outcome.run_id in cancelling
        )
        for judge_round in range(due):
            rows.append(
                (
                    outcome.run_id,
                    outcome.task_id,
                    str(model_id),
                    outcome.record_idx,
                    outcome.repeat_index,
                    "pending",
                    now,
                    int(SubtaskPhase.JUDGE),
                    outcome.row_id,
                    judge_round,
                )
            )
        if due:
            deltas.add_pending(outcome.run_id, outcome.task_id, due)
    if rows:
        await conn.copy_records_to_table(
            "subtasks",
            records=rows,
            columns=(*NEW_SUBTASK_COLUMNS, "phase", "judged_row_id", "judge_round"),
        )
    return sorted({(row[0], row[2]) for row in rows})


async def _failure_event(conn: asyncpg.Connection, outcome: SubtaskOutcome, now: float) -> NewEvent:
    assert outcome.error is not None
    row = await conn.fetchrow(
        "SELECT s.requests, r.record_id, s.failed_rate_limited, s.failed_timeout, "
        "s.failed_transient FROM subtasks s JOIN tasks t ON t.task_id = s.task_id "
        "JOIN dataset_records r ON r.dataset_id = t.dataset_id AND r.idx = s.record_idx "
        "WHERE s.row_id = $1",
        outcome.row_id,
    )
    failure = SampleFailure(
        subtask_id=subtask_public_id(
            outcome.task_id,
            outcome.record_idx,
            outcome.repeat_index,
            outcome.phase,
            outcome.judge_round,
        ),
        task_id=outcome.task_id,
        model_id=outcome.model_id,
        record_id=row["record_id"],
        record_idx=outcome.record_idx,
        repeat_index=outcome.repeat_index,
        attempts=row["requests"],
        error=outcome.error,
        failures=RetryCounts(*tuple(row)[2:]),
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
