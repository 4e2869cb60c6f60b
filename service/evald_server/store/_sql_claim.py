"""Claiming ready work: move a page of subtasks of one (run, model) to ``running``.

This runs once per page on the writer thread, whose Python time competes with the
event loop for the GIL, so it is kept lean: one ``UPDATE … RETURNING`` per kind of
work, records fetched by index range and each decoded once for all its repeats.
"""

import json
import sqlite3
from collections import defaultdict
from typing import Any

from evald_server.domain import RetryCounts, RunState, SubtaskPhase, SubtaskState
from evald_server.store._records import Claim, ClaimedSubtask, Json
from evald_server.store._sql_common import CounterDeltas, append_events, state_event, transaction

_S = SubtaskState
_NO_FAILURES = RetryCounts()

_CLAIM_RETRIES = (
    "UPDATE subtasks SET state = 'running', owner = ?, updated_at = ? WHERE row_id IN ("
    "SELECT row_id FROM subtasks WHERE run_id = ? AND model_id = ? AND state = 'failed' "
    "AND next_attempt_at <= ? ORDER BY next_attempt_at LIMIT ?) "
    "RETURNING row_id, task_id, record_idx, repeat_index, attempt, phase, judge_round, "
    "judged_row_id, failed_rate_limited, failed_timeout, failed_transient"
)
_CLAIM_PENDING = (
    "UPDATE subtasks SET state = 'running', owner = ?, updated_at = ? WHERE row_id IN ("
    "SELECT row_id FROM subtasks WHERE run_id = ? AND model_id = ? AND state = 'pending' "
    "ORDER BY row_id LIMIT ?) "
    "RETURNING row_id, task_id, record_idx, repeat_index, attempt, phase, judge_round, "
    "judged_row_id, failed_rate_limited, failed_timeout, failed_transient"
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
        if run is None or run[1] or RunState(run[0]).is_terminal:
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
        for rows, source in ((retries, _S.FAILED), (pending, _S.PENDING)):
            per_task: defaultdict[str, int] = defaultdict(int)
            for row in rows:
                per_task[row[1]] += 1
            for task_id, count in per_task.items():
                deltas.move(run_id, task_id, source, _S.RUNNING, count)
        deltas.apply(conn)
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
        answers = _judged_answers(conn, [row[7] for row in picked if row[7] is not None])
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


def _judged_answers(conn: sqlite3.Connection, row_ids: list[int]) -> dict[int, str]:
    """The answers that claimed judge subtasks grade, by their row id."""
    if not row_ids:
        return {}
    marks = ",".join("?" * len(row_ids))
    rows = conn.execute(
        f"SELECT row_id, output FROM subtasks WHERE row_id IN ({marks})", row_ids
    ).fetchall()
    return {row_id: output or "" for row_id, output in rows}


def _records(
    conn: sqlite3.Connection, run_id: str, picked: list[Any]
) -> dict[tuple[str, int], tuple[str, str, Json]]:
    """(task, record idx) → (dataset id, record id, decoded fields), one decode per record."""
    datasets = dict(
        conn.execute("SELECT task_id, dataset_id FROM tasks WHERE run_id = ?", (run_id,)).fetchall()
    )
    wanted: defaultdict[str, set[int]] = defaultdict(set)
    for row in picked:
        wanted[row[1]].add(row[2])
    found: dict[tuple[str, int], tuple[str, str, Json]] = {}
    for task_id, idxs in wanted.items():
        dataset_id = datasets[task_id]
        low, high = min(idxs), max(idxs)
        if high - low + 1 <= 2 * len(idxs):  # dense (the usual page): one range scan
            rows = conn.execute(
                "SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = ? "
                "AND idx BETWEEN ? AND ?",
                (dataset_id, low, high),
            ).fetchall()
        else:  # sparse (retries): exactly those
            marks = ",".join("?" * len(idxs))
            rows = conn.execute(
                f"SELECT idx, record_id, fields FROM dataset_records WHERE dataset_id = ? "
                f"AND idx IN ({marks})",
                (dataset_id, *idxs),
            ).fetchall()
        for idx, record_id, fields in rows:
            if idx in idxs:
                found[task_id, idx] = (dataset_id, record_id, json.loads(fields))
    return found
