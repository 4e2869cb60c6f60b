"""Run transitions on SQLite: create (idempotent, quota-checked), cancel, retry, requeue,
a model's work failed, a task's end; events appended outside them.

Each runs in one transaction on the writer thread, which orders every writer of the
file (one process per file).
"""

import sqlite3
from collections.abc import Iterable, Sequence

from evald_server.domain import Counters, EvalError, RunState, SubtaskState
from evald_server.store._errors import LiveRunLimitReached
from evald_server.store._plans import (
    Answer,
    CounterDeltas,
    cancel_applies,
    cancel_events,
    copied_counters,
    counter_values,
    finish_events,
    new_run_values,
    new_subtask_rows,
    new_task_values,
    rescore_events,
    rescore_run_values,
    rescore_task_values,
    run_end,
    score_values,
    state_event,
    summed_counters,
)
from evald_server.store._records import (
    EventRow,
    ExecutionRow,
    FinishReport,
    NewEvent,
    NewRun,
    NewTask,
    RescoreTask,
    RunRow,
    SampleScoreRow,
    TaskFinish,
    TransitionReport,
)
from evald_server.store._rows import (
    ANSWER_COLUMNS,
    COPIED_JUDGE_COLUMNS,
    COPIED_JUDGE_SELECT,
    COPIED_STATES,
    COPIED_SUBTASK_COLUMNS,
    COUNTER_COLUMNS,
    NEW_SUBTASK_COLUMNS,
    UNJUDGED_FROM,
    copied_select,
    dumps,
    error_json,
)
from evald_server.store.sqlite._common import (
    append_events,
    apply_deltas,
    create_judge_subtasks,
    finish_ready_tasks,
    marks,
    read_run,
    transaction,
)

_S = SubtaskState
_NOTHING = TransitionReport(changed=0, finished_tasks=(), events=())


def create_run(
    conn: sqlite3.Connection,
    run: NewRun,
    tasks: Sequence[NewTask],
    retain: int,
    max_live_runs: int | None = None,
) -> tuple[RunRow, bool]:
    """Insert the run, its tasks and every subtask in one transaction.

    With a ``request_id`` already used by this tenant, nothing is inserted and the
    existing run is returned with ``False`` (the caller compares the request hashes).
    With ``max_live_runs`` unfinished runs of the tenant already there, nothing is
    inserted and ``LiveRunLimitReached`` is raised: counted inside the write
    transaction, so concurrent creates cannot all pass the same count.
    """
    with transaction(conn):
        existing = _existing_or_over_quota(conn, run, max_live_runs)
        if existing is not None:
            return existing, False
        conn.execute(
            "INSERT INTO runs (run_id, tenant, name, request_id, request_hash, spec, state, "
            "total, pending, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            new_run_values(run, tasks),
        )
        conn.executemany(
            "INSERT INTO tasks (task_id, run_id, ordinal, model_id, model, dataset_id, state, "
            "total, pending, judge_model_id, judge_rounds) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            new_task_values(run, tasks),
        )
        conn.executemany(  # streamed from the generator: never the whole run in memory
            f"INSERT INTO subtasks ({', '.join(NEW_SUBTASK_COLUMNS)}) "
            f"VALUES ({marks(len(NEW_SUBTASK_COLUMNS))})",
            new_subtask_rows(run, tasks),
        )
        append_events(conn, run.run_id, [state_event(RunState.PENDING, run.created_at)], retain)
        created = read_run(conn, run.run_id)
    assert created is not None
    return created, True


def _existing_or_over_quota(
    conn: sqlite3.Connection, run: NewRun, max_live_runs: int | None
) -> RunRow | None:
    """The run this ``request_id`` created before, if any; ``LiveRunLimitReached`` with
    ``max_live_runs`` unfinished runs of the tenant already there."""
    if run.request_id is not None:
        found = conn.execute(
            "SELECT run_id FROM runs WHERE tenant = ? AND request_id = ?",
            (run.tenant, run.request_id),
        ).fetchone()
        if found is not None:
            existing = read_run(conn, found[0])
            assert existing is not None
            return existing
    if max_live_runs is not None:
        (live,) = conn.execute(
            "SELECT COUNT(*) FROM runs WHERE tenant = ? AND state IN ('pending', 'running')",
            (run.tenant,),
        ).fetchone()
        if live >= max_live_runs:
            raise LiveRunLimitReached(live, max_live_runs)
    return None


def create_rescore_run(
    conn: sqlite3.Connection,
    run: NewRun,
    tasks: Sequence[RescoreTask],
    now: float,
    retain: int,
    max_live_runs: int | None = None,
) -> tuple[RunRow, bool]:
    """Insert a rescored run, its tasks (in ``scoring``) and a copy of each source
    task's terminal answers and of the judge subtasks that graded them, in one
    transaction: all of it or nothing. Idempotent by
    ``request_id`` and quota-checked as ``create_run``."""
    with transaction(conn):
        existing = _existing_or_over_quota(conn, run, max_live_runs)
        if existing is not None:
            return existing, False
        conn.execute(
            "INSERT INTO runs (run_id, tenant, name, request_id, request_hash, spec, state, "
            "created_at, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rescore_run_values(run, now),
        )
        for task in tasks:
            conn.execute(
                "INSERT INTO tasks (task_id, run_id, ordinal, model_id, model, dataset_id, "
                "state, started_at) SELECT ?, ?, ?, ?, ?, ?, ?, started_at FROM tasks "
                "WHERE task_id = ?",
                rescore_task_values(run, task),
            )
            conn.execute(
                f"INSERT INTO subtasks (run_id, task_id, {', '.join(COPIED_SUBTASK_COLUMNS)}) "
                f"SELECT ?, ?, {copied_select(task.keep_logprobs)} FROM subtasks "
                f"WHERE task_id = ? AND phase = 0 AND state IN ({marks(len(COPIED_STATES))}) "
                "ORDER BY row_id",
                (run.run_id, task.task_id, task.source_task_id, *COPIED_STATES),
            )
            conn.execute(
                f"INSERT INTO subtasks (run_id, task_id, {', '.join(COPIED_JUDGE_COLUMNS)}, "
                f"judged_row_id) SELECT ?, ?, {COPIED_JUDGE_SELECT}, "
                "n.row_id FROM subtasks j JOIN subtasks a ON a.row_id = j.judged_row_id "
                "JOIN subtasks n ON n.task_id = ? AND n.phase = 0 "
                "AND n.record_idx = a.record_idx AND n.repeat_index = a.repeat_index "
                f"WHERE j.task_id = ? AND j.phase = 1 AND j.state IN ({marks(len(COPIED_STATES))}) "
                "ORDER BY j.row_id",
                (run.run_id, task.task_id, task.task_id, task.source_task_id, *COPIED_STATES),
            )
        counters = copied_counters(
            conn.execute(
                "SELECT task_id, state, COUNT(*) FROM subtasks WHERE run_id = ? "
                "GROUP BY task_id, state",
                (run.run_id,),
            )
        )
        for task in tasks:
            conn.execute(
                "UPDATE tasks SET total = ?, succeeded = ?, failed_permanent = ?, cancelled = ? "
                "WHERE task_id = ?",
                (*counter_values(counters.get(task.task_id, Counters())), task.task_id),
            )
        conn.execute(
            "UPDATE runs SET total = ?, succeeded = ?, failed_permanent = ?, cancelled = ? "
            "WHERE run_id = ?",
            (*counter_values(summed_counters(counters.values())), run.run_id),
        )
        append_events(conn, run.run_id, rescore_events(now), retain)
        created = read_run(conn, run.run_id)
    assert created is not None
    return created, True


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
        if row is None or not cancel_applies(row):
            return _NOTHING
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
        apply_deltas(conn, deltas)
        task_ids = [r[0] for r in conn.execute(_TASKS_OF_RUN, (run_id,))]
        finished = finish_ready_tasks(conn, task_ids, now)
        events = append_events(conn, run_id, cancel_events(row, now, reason), retain)
    return TransitionReport(
        changed=sum(g[2] for g in groups), finished_tasks=tuple(finished), events=tuple(events)
    )


_TASKS_OF_RUN = "SELECT task_id FROM tasks WHERE run_id = ? ORDER BY ordinal"


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
    a cancelled subtask it does not re-queue stays cancelled, and the answers that
    succeeded under the cancel (no judge subtasks then) get theirs in its tasks."""
    with transaction(conn):
        sql = (
            "SELECT row_id, task_id, model_id, state FROM subtasks "
            f"WHERE run_id = ? AND state IN ({marks(len(states))})"
        )
        params: list[object] = [run_id, *states]
        if task_ids:
            sql += f" AND task_id IN ({marks(len(task_ids))})"
            params.extend(task_ids)
        if categories:
            sql += f" AND json_extract(last_error, '$.category') IN ({marks(len(categories))})"
            params.extend(categories)
        if reasons:
            sql += f" AND json_extract(last_error, '$.reason') IN ({marks(len(reasons))})"
            params.extend(reasons)
        rows = conn.execute(sql, params).fetchall()
        if not rows:
            return _NOTHING
        conn.executemany(
            "UPDATE subtasks SET state = 'pending', attempt = 0, next_attempt_at = NULL, "
            "failed_rate_limited = 0, failed_timeout = 0, failed_transient = 0, "
            "updated_at = ? WHERE row_id = ?",
            [(now, r[0]) for r in rows],
        )
        deltas = CounterDeltas()
        for _row_id, task_id, _model, state in rows:
            deltas.move(run_id, task_id, _S(state), _S.PENDING)
        # The cancel lifted: answers that succeeded under it are judged now.
        judges = create_judge_subtasks(conn, _unjudged(conn, run_id, task_ids), deltas, now)
        apply_deltas(conn, deltas)
        touched = sorted(deltas.tasks)
        conn.executemany(
            "UPDATE tasks SET state = 'running', result_status = NULL, finished_at = NULL "
            "WHERE task_id = ?",
            [(task_id,) for task_id in touched],
        )
        conn.executemany("DELETE FROM results WHERE task_id = ?", [(t,) for t in touched])
        (previous,) = conn.execute("SELECT state FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        conn.execute(
            "UPDATE runs SET state = 'running', finished_at = NULL, terminal_seq = NULL, "
            "cancel_requested = 0, cancel_reason = NULL WHERE run_id = ?",
            (run_id,),
        )
        event = state_event(RunState.RUNNING, now, RunState(previous), retried=len(rows))
        events = append_events(conn, run_id, [event], retain)
    return TransitionReport(
        changed=len(rows),
        finished_tasks=(),
        events=tuple(events),
        models=tuple(sorted({r[2] for r in rows} | {model for _, model in judges.work})),
    )


def _unjudged(conn: sqlite3.Connection, run_id: str, task_ids: Sequence[str]) -> list[Answer]:
    """The run's succeeded answers (of ``task_ids``, if given) that their judged task
    has not given judge subtasks."""
    sql = f"SELECT {ANSWER_COLUMNS} {UNJUDGED_FROM} AND t.run_id = ?"
    params: list[object] = [run_id]
    if task_ids:
        sql += f" AND t.task_id IN ({marks(len(task_ids))})"
        params.extend(task_ids)
    return [Answer(*row) for row in conn.execute(sql + " ORDER BY a.row_id", params)]


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
        apply_deltas(conn, deltas)
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
        apply_deltas(conn, deltas)
        return finish_ready_tasks(conn, list(deltas.tasks), now)


_STORE_SCORES = "UPDATE subtasks SET scores = ?, correct = ?, judgement = ? WHERE row_id = ?"


def store_sample_scores(conn: sqlite3.Connection, scores: Iterable[SampleScoreRow]) -> None:
    """Per-sample scores of a page scored before its task's end (each row replaces the
    subtask's scores, correct and judgement)."""
    with transaction(conn):
        conn.executemany(_STORE_SCORES, score_values(scores))


def store_executions(conn: sqlite3.Connection, executions: Sequence[ExecutionRow]) -> None:
    """Code samples' runs in the sandbox, each beside its (succeeded) answer."""
    with transaction(conn):
        conn.executemany(
            "UPDATE subtasks SET execution = ? WHERE row_id = ? AND phase = 0",
            [(e.execution, e.row_id) for e in executions],
        )


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
        conn.executemany(_STORE_SCORES, score_values(finish.sample_scores))
        previous, cancel_requested, reason = conn.execute(
            "SELECT state, cancel_requested, cancel_reason FROM runs WHERE run_id = ?", (run_id,)
        ).fetchone()
        states = [r[0] for r in conn.execute("SELECT state FROM tasks WHERE run_id = ?", (run_id,))]
        run_state = run_end(states, cancel_requested=cancel_requested)
        if run_state is not None:
            conn.execute(
                "UPDATE runs SET state = ?, finished_at = ? WHERE run_id = ?",
                (run_state.value, finish.time, run_id),
            )
        new_events = finish_events(finish, run_state, previous, reason)
        events = append_events(conn, run_id, new_events, retain)
        if run_state is not None:
            conn.execute(
                "UPDATE runs SET terminal_seq = ? WHERE run_id = ?", (events[-1].seq, run_id)
            )
    return FinishReport(events=tuple(events), run_state=run_state)


def add_events(
    conn: sqlite3.Connection,
    run_id: str,
    events: Sequence[NewEvent],
    retain: int,
    live_only: bool,
) -> list[EventRow]:
    """Append to the run's log; ``live_only``: nothing once the run has finished."""
    with transaction(conn):
        row = conn.execute("SELECT state FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None or (live_only and RunState(row[0]).is_terminal):
            return []  # nothing may follow a run's terminal event
        return append_events(conn, run_id, events, retain)
