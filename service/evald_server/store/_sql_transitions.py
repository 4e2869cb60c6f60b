"""State transitions outside the hot path: cancel, retry, resume, and a task's end."""

import sqlite3
from collections.abc import Iterable, Iterator, Sequence

from evald_server.domain import (
    Counters,
    EvalError,
    EventKind,
    RunState,
    SubtaskState,
    TaskState,
    inference_finished,
    run_state_if_done,
)
from evald_server.store._records import (
    COUNTER_COLUMNS,
    FinishReport,
    NewEvent,
    SampleScoreRow,
    TaskFinish,
    TransitionReport,
)
from evald_server.store._sql_common import (
    CounterDeltas,
    append_events,
    dumps,
    error_json,
    state_event,
    transaction,
)
from evald_server.store._sql_outcomes import finish_ready_tasks

_S = SubtaskState


def cancel_run(
    conn: sqlite3.Connection, run_id: str, now: float, retain: int, reason: str | None = None
) -> TransitionReport:
    """Mark the run cancelled and cancel its pending and waiting subtasks.

    Running subtasks stay with their owner, which aborts the calls (or, for a
    ``reason`` such as a budget, lets them finish) and records them. A run with
    nothing left to execute (only scoring remains) is not changed.
    """
    with transaction(conn):
        row = conn.execute(
            f"SELECT state, cancel_requested, {', '.join(COUNTER_COLUMNS)} FROM runs "
            "WHERE run_id = ?",
            (run_id,),
        ).fetchone()
        if row is None or RunState(row[0]).is_terminal or inference_finished(Counters(*row[2:])):
            return TransitionReport(changed=0, finished_tasks=(), events=())
        already = bool(row[1])  # a restart finishing a cancel: cancel what was requeued
        groups = []
        for state in ("pending", "failed"):  # one per partial index: each is a range scan
            groups += conn.execute(
                "SELECT task_id, state, COUNT(*) FROM subtasks WHERE run_id = ? "
                f"AND state = '{state}' GROUP BY task_id",
                (run_id,),
            ).fetchall()
            conn.execute(
                "UPDATE subtasks SET state = 'cancelled', next_attempt_at = NULL, updated_at = ? "
                f"WHERE run_id = ? AND state = '{state}'",
                (now, run_id),
            )
        conn.execute(
            "UPDATE runs SET cancel_requested = 1, cancel_reason = COALESCE(cancel_reason, ?) "
            "WHERE run_id = ?",
            (reason, run_id),
        )
        deltas = CounterDeltas()
        for task_id, state, count in groups:
            deltas.move(run_id, task_id, _S(state), _S.CANCELLED, count)
        deltas.apply(conn)
        task_ids = [
            r[0] for r in conn.execute("SELECT task_id FROM tasks WHERE run_id = ?", (run_id,))
        ]
        finished = finish_ready_tasks(conn, task_ids, now)
        events = []
        if not already:
            events = append_events(
                conn,
                run_id,
                [
                    state_event(
                        RunState(row[0]),
                        now,
                        RunState(row[0]),
                        cancel_requested=True,
                        cancel_reason=reason,
                    )
                ],
                retain,
            )
    return TransitionReport(
        changed=sum(g[2] for g in groups), finished_tasks=tuple(finished), events=tuple(events)
    )


def retry_failed(
    conn: sqlite3.Connection,
    run_id: str,
    task_ids: Sequence[str],
    categories: Sequence[str],
    now: float,
    retain: int,
    reasons: Sequence[str] = (),
    states: Sequence[str] = (_S.FAILED_PERMANENT.value,),
) -> TransitionReport:
    """Re-queue the run's subtasks in ``states`` (``failed_permanent`` and/or
    ``cancelled``), optionally only of some tasks or whose last error has one of some
    categories or reasons, with a fresh retry budget; their tasks will be scored again.
    The retry lifts the run's cancel (``RETRYABLE_STATES``): what it re-queues must run,
    and a cancelled subtask it does not re-queue stays cancelled."""
    with transaction(conn):
        sql = (
            "SELECT row_id, task_id, model_id, state FROM subtasks "
            f"WHERE run_id = ? AND state IN ({','.join('?' * len(states))})"
        )
        params: list[object] = [run_id, *states]
        if task_ids:
            sql += f" AND task_id IN ({','.join('?' * len(task_ids))})"
            params.extend(task_ids)
        if categories:
            marks = ",".join("?" * len(categories))
            sql += f" AND json_extract(last_error, '$.category') IN ({marks})"
            params.extend(categories)
        if reasons:
            marks = ",".join("?" * len(reasons))
            sql += f" AND json_extract(last_error, '$.reason') IN ({marks})"
            params.extend(reasons)
        rows = conn.execute(sql, params).fetchall()
        if not rows:
            return TransitionReport(changed=0, finished_tasks=(), events=())
        conn.executemany(
            "UPDATE subtasks SET state = 'pending', attempt = 0, next_attempt_at = NULL, "
            "failed_rate_limited = 0, failed_timeout = 0, failed_transient = 0, "
            "updated_at = ? WHERE row_id = ?",
            [(now, r[0]) for r in rows],
        )
        deltas = CounterDeltas()
        for _row_id, task_id, _model, state in rows:
            deltas.move(run_id, task_id, _S(state), _S.PENDING)
        deltas.apply(conn)
        for task_id in deltas.tasks:
            conn.execute(
                "UPDATE tasks SET state = 'running', result_status = NULL, finished_at = NULL "
                "WHERE task_id = ?",
                (task_id,),
            )
            conn.execute("DELETE FROM results WHERE task_id = ?", (task_id,))
        previous = RunState(
            conn.execute("SELECT state FROM runs WHERE run_id = ?", (run_id,)).fetchone()[0]
        )
        conn.execute(
            "UPDATE runs SET state = 'running', finished_at = NULL, terminal_seq = NULL, "
            "cancel_requested = 0, cancel_reason = NULL WHERE run_id = ?",
            (run_id,),
        )
        event = state_event(RunState.RUNNING, now, previous, retried=len(rows))
        events = append_events(conn, run_id, [event], retain)
    return TransitionReport(
        changed=len(rows),
        finished_tasks=(),
        events=tuple(events),
        models=tuple(sorted({r[2] for r in rows})),
    )


def requeue_running(conn: sqlite3.Connection, owner: str | None, now: float) -> int:
    """Give subtasks left ``running`` (by a dead process, or by ``owner``) back to
    ``pending`` without spending a retry; returns how many."""
    with transaction(conn):
        where = "state = 'running'" + ("" if owner is None else " AND owner = ?")
        params: tuple[object, ...] = () if owner is None else (owner,)
        groups = conn.execute(
            f"SELECT run_id, task_id, COUNT(*) FROM subtasks WHERE {where} "
            "GROUP BY run_id, task_id",
            params,
        ).fetchall()
        if not groups:
            return 0
        conn.execute(
            f"UPDATE subtasks SET state = 'pending', owner = NULL, updated_at = ? WHERE {where}",
            (now, *params),
        )
        deltas = CounterDeltas()
        for run_id, task_id, count in groups:
            deltas.move(run_id, task_id, _S.RUNNING, _S.PENDING, count)
        deltas.apply(conn)
    return sum(g[2] for g in groups)


def fail_model_work(
    conn: sqlite3.Connection, run_id: str, model_id: str, error: EvalError, now: float
) -> list[str]:
    """Fail the unfinished subtasks of (run, model) permanently, e.g. when the model is
    no longer configured after a restart; returns the tasks this finished."""
    with transaction(conn):
        groups = conn.execute(
            "SELECT task_id, state, COUNT(*) FROM subtasks WHERE run_id = ? AND model_id = ? "
            "AND state IN ('pending', 'failed', 'running') GROUP BY task_id, state",
            (run_id, model_id),
        ).fetchall()
        text = error_json(error)
        conn.execute(
            "UPDATE subtasks SET state = 'failed_permanent', owner = NULL, updated_at = ?, "
            "next_attempt_at = NULL, first_error = COALESCE(first_error, ?), last_error = ? "
            "WHERE run_id = ? AND model_id = ? AND state IN ('pending', 'failed', 'running')",
            (now, text, text, run_id, model_id),
        )
        deltas = CounterDeltas()
        for task_id, state, count in groups:
            deltas.move(run_id, task_id, _S(state), _S.FAILED_PERMANENT, count)
        deltas.apply(conn)
        return finish_ready_tasks(conn, list(deltas.tasks), now)


_STORE_SCORES = "UPDATE subtasks SET scores = ?, correct = ?, judgement = ? WHERE row_id = ?"


def _score_params(
    scores: Iterable[SampleScoreRow],
) -> Iterator[tuple[str | None, int | None, str | None, int]]:
    for s in scores:
        yield (
            None if s.scores is None else dumps({"scores": s.scores, "flags": list(s.flags)}),
            None if s.correct is None else int(s.correct),
            None if s.judgement is None else dumps(s.judgement),
            s.row_id,
        )


def store_sample_scores(conn: sqlite3.Connection, scores: Iterable[SampleScoreRow]) -> None:
    """Per-sample scores of a page scored before its task's end (each row replaces the
    subtask's scores, correct and judgement)."""
    with transaction(conn):
        conn.executemany(_STORE_SCORES, _score_params(scores))


def finish_task(conn: sqlite3.Connection, finish: TaskFinish, retain: int) -> FinishReport:
    """Store a task's result and final state; end the run when it was the last task."""
    with transaction(conn):
        row = conn.execute(
            "UPDATE tasks SET state = ?, result_status = ?, "
            "finished_at = COALESCE(finished_at, ?) WHERE task_id = ? AND state = 'scoring' "
            "RETURNING run_id",
            (finish.state.value, finish.result_status, finish.time, finish.task_id),
        ).fetchone()
        if row is None:
            return FinishReport(events=(), run_state=None)  # retried or finished meanwhile
        run_id = row[0]
        conn.execute(
            "INSERT OR REPLACE INTO results (task_id, run_id, result) VALUES (?, ?, ?)",
            (finish.task_id, run_id, dumps(finish.result)),
        )
        if finish.clear_scores:
            conn.execute(
                "UPDATE subtasks SET scores = NULL, correct = NULL "
                "WHERE task_id = ? AND scores IS NOT NULL",
                (finish.task_id,),
            )
        conn.executemany(_STORE_SCORES, _score_params(finish.sample_scores))
        new_events = [
            NewEvent(kind=EventKind.TASK_SCORED, payload=finish.event_payload, time=finish.time)
        ]
        run_state = _run_state_if_done(conn, run_id)
        if run_state is not None:
            previous_state, reason = conn.execute(
                "SELECT state, cancel_reason FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            conn.execute(
                "UPDATE runs SET state = ?, finished_at = ? WHERE run_id = ?",
                (run_state.value, finish.time, run_id),
            )
            new_events.append(
                state_event(
                    run_state,
                    finish.time,
                    RunState(previous_state),
                    cancel_reason=reason if run_state is RunState.CANCELLED else None,
                )
            )
        events = append_events(conn, run_id, new_events, retain)
        if run_state is not None:
            conn.execute(
                "UPDATE runs SET terminal_seq = ? WHERE run_id = ?", (events[-1].seq, run_id)
            )
    return FinishReport(events=tuple(events), run_state=run_state)


def _run_state_if_done(conn: sqlite3.Connection, run_id: str) -> RunState | None:
    states = [
        TaskState(r[0]) for r in conn.execute("SELECT state FROM tasks WHERE run_id = ?", (run_id,))
    ]
    cancel = conn.execute(
        "SELECT cancel_requested FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()[0]
    return run_state_if_done(states, cancel_requested=bool(cancel))
