"""The hot path on SQLite: claim a page of ready work, and record outcomes (the group
commit), each in one transaction on the writer thread.

The writer's Python time competes with the event loop for the GIL, so a claim stays
lean: one ``UPDATE … RETURNING`` per kind of work, records fetched by index range and
each decoded once for all its repeats. Counters move in the same transaction as the
subtask rows they count, so a recount from the subtasks always equals them.
"""

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

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
from evald_server.store._records import Claim, CompletionReport, Json, SubtaskOutcome
from evald_server.store._rows import CLAIMED_COLUMNS, FAILURE_COLUMNS, SUBTASKS_FROM
from evald_server.store.sqlite._common import (
    append_events,
    apply_deltas,
    create_judge_subtasks,
    finish_ready_tasks,
    marks,
    transaction,
)

_CLAIM_RETRIES = (
    "UPDATE subtasks SET state = 'running', owner = ?, updated_at = ? WHERE row_id IN ("
    "SELECT row_id FROM subtasks WHERE run_id = ? AND model_id = ? AND state = 'failed' "
    f"AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?) RETURNING {CLAIMED_COLUMNS}"
)
_CLAIM_PENDING = (
    "UPDATE subtasks SET state = 'running', owner = ?, updated_at = ? WHERE row_id IN ("
    "SELECT row_id FROM subtasks WHERE run_id = ? AND model_id = ? AND state = 'pending' "
    f"ORDER BY row_id LIMIT ?) RETURNING {CLAIMED_COLUMNS}"
)


def claim_ready(
    conn: sqlite3.Connection,
    run_id: str,
    model_id: str,
    limit: int,
    owner: str,
    now: float,
    retain: int,
) -> Claim:
    """Move up to ``limit`` ready subtasks of (run, model) to ``running`` for ``owner``.

    Due retries come first (oldest due first), then pending work in run order.
    """
    with transaction(conn):
        run = conn.execute(
            "SELECT state, cancel_requested FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        if run is None or not claimable(run[0], run[1]):
            return Claim(subtasks=(), exhausted=True, next_retry_at=None)
        retries = conn.execute(
            _CLAIM_RETRIES, (owner, now, run_id, model_id, now, limit)
        ).fetchall()
        want = limit - len(retries)
        pending = conn.execute(_CLAIM_PENDING, (owner, now, run_id, model_id, want)).fetchall()
        exhausted = len(pending) < want
        next_retry_at = None
        if exhausted:
            next_retry_at = conn.execute(
                "SELECT MIN(next_attempt_at) FROM subtasks WHERE run_id = ? AND model_id = ? "
                "AND state = 'failed'",
                (run_id, model_id),
            ).fetchone()[0]
        if not retries and not pending:
            return Claim(subtasks=(), exhausted=exhausted, next_retry_at=next_retry_at)
        deltas = CounterDeltas()
        count_claim(deltas, run_id, retries, pending)
        apply_deltas(conn, deltas)
        conn.executemany(
            "UPDATE tasks SET state = 'running', started_at = ? "
            "WHERE task_id = ? AND state = 'pending'",
            [(now, task_id) for task_id in deltas.tasks],
        )
        events = []
        if RunState(run[0]) is RunState.PENDING:
            conn.execute(
                "UPDATE runs SET state = 'running', started_at = ? WHERE run_id = ?", (now, run_id)
            )
            event = state_event(RunState.RUNNING, now, RunState.PENDING)
            events = append_events(conn, run_id, [event], retain)
        picked = sorted(retries + pending)
        records = _records(conn, run_id, picked)
        answers = _judged_answers(conn, judged_row_ids(picked))
    return Claim(
        subtasks=claimed_subtasks(run_id, model_id, picked, records, answers),
        exhausted=exhausted,
        next_retry_at=next_retry_at,
        events=tuple(events),
    )


def _judged_answers(conn: sqlite3.Connection, row_ids: list[int]) -> dict[int, str]:
    """The answers that claimed judge subtasks grade, by their row id."""
    if not row_ids:
        return {}
    rows = conn.execute(
        f"SELECT row_id, output FROM subtasks WHERE row_id IN ({marks(len(row_ids))})", row_ids
    ).fetchall()
    return {row_id: output or "" for row_id, output in rows}


def _records(
    conn: sqlite3.Connection, run_id: str, picked: list[Any]
) -> dict[tuple[str, int], tuple[str, str, Json]]:
    """(task, record idx) → (dataset id, record id, decoded fields), one decode per record."""
    datasets = dict(
        conn.execute("SELECT task_id, dataset_id FROM tasks WHERE run_id = ?", (run_id,)).fetchall()
    )
    found: dict[tuple[str, int], tuple[str, str, Json]] = {}
    for task_id, idxs in wanted_records(picked).items():
        dataset_id = datasets[task_id]
        low, high = min(idxs), max(idxs)
        if high - low + 1 <= 2 * len(idxs):  # dense (the usual page): one range scan
            rows = conn.execute(
                "SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = ? "
                "AND idx BETWEEN ? AND ?",
                (dataset_id, low, high),
            ).fetchall()
        else:  # sparse (retries): exactly those
            rows = conn.execute(
                "SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = ? "
                f"AND idx IN ({marks(len(idxs))})",
                (dataset_id, *idxs),
            ).fetchall()
        for idx, record_id, fields in rows:
            if idx in idxs:
                found[task_id, idx] = (dataset_id, record_id, json.loads(fields))
    return found


_UPDATE_OUTCOME = (
    "UPDATE subtasks SET state = ?, owner = NULL, updated_at = ?, "
    "attempt = attempt + ?, requests = requests + ?, rate_limited = rate_limited + ?, "
    "call_time_s = call_time_s + ?, next_attempt_at = ?, "
    "output = COALESCE(?, output), prompt_tokens = COALESCE(?, prompt_tokens), "
    "completion_tokens = COALESCE(?, completion_tokens), latency_s = COALESCE(?, latency_s), "
    "ttft_s = COALESCE(?, ttft_s), first_error = COALESCE(first_error, ?), "
    "last_error = COALESCE(?, last_error), top_logprobs = COALESCE(?, top_logprobs), "
    "finish_reason = COALESCE(?, finish_reason), "
    "failed_rate_limited = failed_rate_limited + ?, failed_timeout = failed_timeout + ?, "
    "failed_transient = failed_transient + ?, cost_picousd = COALESCE(?, cost_picousd), "
    "cost_tokens = COALESCE(?, cost_tokens), cost_estimated = MAX(cost_estimated, ?), "
    "verdict = COALESCE(?, verdict), cache_hit = ?, answer_flags = COALESCE(?, answer_flags) "
    "WHERE row_id = ?"
)
_ADD_RUN_COST = (
    "UPDATE runs SET cost_picousd = cost_picousd + ?, cost_tokens = cost_tokens + ?, "
    "cost_estimated = MAX(cost_estimated, ?) WHERE run_id = ?"
)
_FAILED = f"SELECT {FAILURE_COLUMNS} {SUBTASKS_FROM} WHERE s.row_id = ?"


def record_outcomes(
    conn: sqlite3.Connection,
    outcomes: Sequence[SubtaskOutcome],
    owner: str,
    now: float,
    retain: int,
) -> CompletionReport:
    """Record a batch of outcomes in one transaction (the group commit)."""
    with transaction(conn):
        run_ids = sorted({o.run_id for o in outcomes})
        cancelling = {
            row[0]
            for row in conn.execute(
                f"SELECT run_id FROM runs WHERE run_id IN ({marks(len(run_ids))}) "
                "AND cancel_requested = 1",
                run_ids,
            )
        }
        owned = {
            row[0]
            for row in conn.execute(
                f"SELECT row_id FROM subtasks WHERE row_id IN ({marks(len(outcomes))}) "
                "AND state = 'running' AND owner = ?",
                [*(o.row_id for o in outcomes), owner],
            )
        }
        plan = plan_outcomes(outcomes, owned, cancelling, now)
        conn.executemany(_UPDATE_OUTCOME, plan.updates)
        conn.executemany(_ADD_RUN_COST, plan.cost_values())
        judges = create_judge_subtasks(conn, plan.answers, plan.deltas, now, cancelling)
        apply_deltas(conn, plan.deltas)
        finished = finish_ready_tasks(conn, list(plan.deltas.tasks), now)
        failures = [
            (o.run_id, failure_event(o, conn.execute(_FAILED, (o.row_id,)).fetchone(), now))
            for o in plan.failures
        ]
        appended = []
        for run_id, events in group_by_run(failures).items():
            appended.extend(append_events(conn, run_id, events, retain))
    return plan.report(finished, appended, judges.work)
