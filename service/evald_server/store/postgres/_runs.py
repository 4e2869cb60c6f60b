"""Run transitions on PostgreSQL: create (idempotent across replicas, quota-checked),
cancel, retry, requeue, a model's work failed, a task's end under its scoring lease;
events appended outside them.

Each transaction locks its run row first (``_common.lock_runs``) and notifies the other
replicas of what they must act on: new work, a cancel, a finished run.
"""

from collections.abc import Iterable, Sequence

import asyncpg

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
    CALLS_FINISH,
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
from evald_server.store.postgres._common import (
    CANCEL,
    EVERYONE,
    FINISHED,
    WORK,
    append_events,
    apply_deltas,
    create_judge_subtasks,
    finish_ready_tasks,
    lock_runs,
    notice,
    notify,
    read_run,
)

_S = SubtaskState
_NOTHING = TransitionReport(changed=0, finished_tasks=(), events=())


async def create_run(
    conn: asyncpg.Connection,
    run: NewRun,
    tasks: Sequence[NewTask],
    retain: int,
    max_live_runs: int | None,
    origin: str,
) -> tuple[RunRow, bool]:
    """Insert the run, its tasks and every subtask (``COPY``) in one transaction.

    The tenant's advisory lock orders concurrent creates of one tenant on every
    replica, so the live-run quota and the request id are decided one create at a time
    (the unique index on (tenant, request_id) backs the latter up). A run id that is
    already stored is this create committed by an attempt whose answer was lost.
    """
    async with conn.transaction():
        existing = await _existing_or_over_quota(conn, run, max_live_runs)
        if existing is not None:
            return existing
        await conn.execute(
            "INSERT INTO runs (run_id, tenant, name, request_id, request_hash, spec, state, "
            "total, pending, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            *new_run_values(run, tasks),
        )
        await conn.executemany(
            "INSERT INTO tasks (task_id, run_id, ordinal, model_id, model, dataset_id, state, "
            "total, pending, judge_model_id, judge_rounds) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            new_task_values(run, tasks),
        )
        await conn.copy_records_to_table(  # streamed from the generator
            "subtasks", records=new_subtask_rows(run, tasks), columns=NEW_SUBTASK_COLUMNS
        )
        created_event = state_event(RunState.PENDING, run.created_at)
        await append_events(conn, run.run_id, [created_event], retain, origin)
        await notify(conn, [notice(WORK, origin, run.run_id)])
        created = await read_run(conn, run.run_id)
    assert created is not None
    return created, True


async def _existing_or_over_quota(
    conn: asyncpg.Connection, run: NewRun, max_live_runs: int | None
) -> tuple[RunRow, bool] | None:
    """Under the tenant's advisory lock: the run this ``request_id`` (or this run id: an
    attempt whose answer was lost) created before, with whether it is this create's;
    ``LiveRunLimitReached`` with ``max_live_runs`` unfinished runs already there."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"tenant:{run.tenant}")
    if run.request_id is not None:
        found = await conn.fetchval(
            "SELECT run_id FROM runs WHERE tenant = $1 AND request_id = $2",
            run.tenant,
            run.request_id,
        )
        if found is not None:
            existing = await read_run(conn, found)
            assert existing is not None
            return existing, found == run.run_id
    again = await read_run(conn, run.run_id)
    if again is not None:
        return again, True
    if max_live_runs is not None:
        live = await conn.fetchval(
            "SELECT COUNT(*) FROM runs WHERE tenant = $1 AND state IN ('pending', 'running')",
            run.tenant,
        )
        if live >= max_live_runs:
            raise LiveRunLimitReached(int(live), max_live_runs)
    return None


async def create_rescore_run(
    conn: asyncpg.Connection,
    run: NewRun,
    tasks: Sequence[RescoreTask],
    now: float,
    retain: int,
    max_live_runs: int | None,
    origin: str,
) -> tuple[RunRow, bool]:
    """Insert a rescored run, its tasks (in ``scoring``) and a copy of each source
    task's terminal answers (``INSERT … SELECT``, in row order), in one transaction:
    all of it or nothing. Idempotent by ``request_id`` and quota-checked as
    ``create_run``."""
    async with conn.transaction():
        existing = await _existing_or_over_quota(conn, run, max_live_runs)
        if existing is not None:
            return existing
        await conn.execute(
            "INSERT INTO runs (run_id, tenant, name, request_id, request_hash, spec, state, "
            "created_at, started_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            *rescore_run_values(run, now),
        )
        states = ", ".join(f"'{state}'" for state in COPIED_STATES)
        for task in tasks:
            await conn.execute(
                "INSERT INTO tasks (task_id, run_id, ordinal, model_id, model, dataset_id, "
                "state, started_at) SELECT $1, $2, $3, $4, $5, $6, $7, started_at FROM tasks "
                "WHERE task_id = $8",
                *rescore_task_values(run, task),
            )
            await conn.execute(
                f"INSERT INTO subtasks (run_id, task_id, {', '.join(COPIED_SUBTASK_COLUMNS)}) "
                f"SELECT $1, $2, {copied_select(task.keep_logprobs)} FROM subtasks "
                f"WHERE task_id = $3 AND phase = 0 AND state IN ({states}) ORDER BY row_id",
                run.run_id,
                task.task_id,
                task.source_task_id,
            )
            await conn.execute(
                f"INSERT INTO subtasks (run_id, task_id, {', '.join(COPIED_JUDGE_COLUMNS)}, "
                f"judged_row_id) SELECT $1, $2, {COPIED_JUDGE_SELECT}, "
                "n.row_id FROM subtasks j JOIN subtasks a ON a.row_id = j.judged_row_id "
                "JOIN subtasks n ON n.task_id = $2 AND n.phase = 0 "
                "AND n.record_idx = a.record_idx AND n.repeat_index = a.repeat_index "
                f"WHERE j.task_id = $3 AND j.phase = 1 AND j.state IN ({states}) ORDER BY j.row_id",
                run.run_id,
                task.task_id,
                task.source_task_id,
            )
        counters = copied_counters(
            await conn.fetch(
                "SELECT task_id, state, COUNT(*) FROM subtasks WHERE run_id = $1 "
                "GROUP BY task_id, state",
                run.run_id,
            )
        )
        await conn.executemany(
            "UPDATE tasks SET total = $1, succeeded = $2, failed_permanent = $3, cancelled = $4 "
            "WHERE task_id = $5",
            [
                (*counter_values(counters.get(task.task_id, Counters())), task.task_id)
                for task in tasks
            ],
        )
        await conn.execute(
            "UPDATE runs SET total = $1, succeeded = $2, failed_permanent = $3, cancelled = $4 "
            "WHERE run_id = $5",
            *counter_values(summed_counters(counters.values())),
            run.run_id,
        )
        await append_events(conn, run.run_id, rescore_events(now), retain, origin)
        await notify(conn, [notice(WORK, origin, run.run_id)])
        created = await read_run(conn, run.run_id)
    assert created is not None
    return created, True


async def cancel_run(
    conn: asyncpg.Connection,
    run_id: str,
    now: float,
    retain: int,
    origin: str,
    reason: str | None = None,
) -> TransitionReport:
    """Mark the run cancelled and cancel its pending and waiting subtasks; every replica
    is told, so the one running its calls aborts them (or, for a ``reason`` such as a
    budget, lets them finish). The first reason given is kept."""
    async with conn.transaction():
        await lock_runs(conn, [run_id])
        row = await conn.fetchrow(
            f"SELECT state, cancel_requested, {', '.join(COUNTER_COLUMNS)} FROM runs "
            "WHERE run_id = $1",
            run_id,
        )
        if row is None or not cancel_applies(row):
            return _NOTHING
        deltas = CounterDeltas()
        changed = 0
        for state in (_S.PENDING, _S.FAILED):
            moved = await conn.fetch(
                "UPDATE subtasks SET state = 'cancelled', next_attempt_at = NULL, "
                "updated_at = $2 WHERE run_id = $1 AND state = $3 RETURNING task_id",
                run_id,
                now,
                state.value,
            )
            changed += deltas.move_each(run_id, (r[0] for r in moved), state, _S.CANCELLED)
        await conn.execute(
            "UPDATE runs SET cancel_requested = TRUE, cancel_reason = COALESCE(cancel_reason, $2) "
            "WHERE run_id = $1",
            run_id,
            reason,
        )
        await apply_deltas(conn, deltas)
        task_ids = [r[0] for r in await conn.fetch(_TASKS_OF_RUN, run_id)]
        finished = await finish_ready_tasks(conn, task_ids, now)
        events = await append_events(conn, run_id, cancel_events(row, now, reason), retain, origin)
        await notify(conn, [notice(CANCEL, origin, run_id, "" if reason is None else CALLS_FINISH)])
    return TransitionReport(changed=changed, finished_tasks=tuple(finished), events=tuple(events))


_TASKS_OF_RUN = "SELECT task_id FROM tasks WHERE run_id = $1 ORDER BY ordinal"


async def retry_failed(
    conn: asyncpg.Connection,
    run_id: str,
    task_ids: Sequence[str],
    categories: Sequence[str],
    now: float,
    retain: int,
    reasons: Sequence[str],
    states: Sequence[str],
    origin: str,
) -> TransitionReport:
    """Re-queue the run's subtasks in ``states`` (optionally of some tasks, or whose last
    error has one of some categories or reasons) with a fresh retry budget; their tasks
    will be scored again. The retry lifts the run's cancel (``RETRYABLE_STATES``): what
    it re-queues must run, a cancelled subtask it does not re-queue stays cancelled, and
    the answers that succeeded under the cancel (no judge subtasks then) get theirs in
    its tasks."""
    async with conn.transaction():
        runs = await lock_runs(conn, [run_id])
        if run_id not in runs:
            return _NOTHING
        sql = (
            "UPDATE subtasks s SET state = 'pending', attempt = 0, next_attempt_at = NULL, "
            "failed_rate_limited = 0, failed_timeout = 0, failed_transient = 0, "
            "updated_at = $2 FROM subtasks old WHERE old.row_id = s.row_id "
            "AND s.run_id = $1 AND s.state = ANY($3::text[])"
        )
        params: list[object] = [run_id, now, list(states)]
        if task_ids:
            params.append(list(task_ids))
            sql += f" AND s.task_id = ANY(${len(params)}::text[])"
        if categories:
            params.append(list(categories))
            sql += f" AND (s.last_error::json ->> 'category') = ANY(${len(params)}::text[])"
        if reasons:
            params.append(list(reasons))
            sql += f" AND (s.last_error::json ->> 'reason') = ANY(${len(params)}::text[])"
        rows = await conn.fetch(sql + " RETURNING s.task_id, s.model_id, old.state", *params)
        if not rows:
            return _NOTHING
        deltas = CounterDeltas()
        for task_id, _model, state in rows:
            deltas.move(run_id, task_id, _S(state), _S.PENDING)
        # The cancel lifted: answers that succeeded under it are judged now.
        unjudged = await _unjudged(conn, run_id, task_ids)
        judges = await create_judge_subtasks(conn, unjudged, deltas, now)
        await apply_deltas(conn, deltas)
        touched = sorted(deltas.tasks)
        await conn.execute(
            "UPDATE tasks SET state = 'running', result_status = NULL, finished_at = NULL, "
            "scorer = NULL WHERE task_id = ANY($1::text[])",
            touched,
        )
        await conn.execute("DELETE FROM results WHERE task_id = ANY($1::text[])", touched)
        previous = RunState(runs[run_id]["state"])
        await conn.execute(
            "UPDATE runs SET state = 'running', finished_at = NULL, terminal_seq = NULL, "
            "cancel_requested = FALSE, cancel_reason = NULL WHERE run_id = $1",
            run_id,
        )
        event = state_event(RunState.RUNNING, now, previous, retried=len(rows))
        events = await append_events(conn, run_id, [event], retain, origin)
        await notify(conn, [notice(WORK, origin, run_id)])
    return TransitionReport(
        changed=len(rows),
        finished_tasks=(),
        events=tuple(events),
        models=tuple(sorted({r[1] for r in rows} | {model for _, model in judges.work})),
    )


async def _unjudged(conn: asyncpg.Connection, run_id: str, task_ids: Sequence[str]) -> list[Answer]:
    """The run's succeeded answers (of ``task_ids``, if given) that their judged task
    has not given judge subtasks."""
    sql = f"SELECT {ANSWER_COLUMNS} {UNJUDGED_FROM} AND t.run_id = $1"
    params: list[object] = [run_id]
    if task_ids:
        params.append(list(task_ids))
        sql += " AND t.task_id = ANY($2::text[])"
    return [Answer(*row) for row in await conn.fetch(sql + " ORDER BY a.row_id", *params)]


async def requeue_running(
    conn: asyncpg.Connection, owners: Sequence[str] | None, live: Sequence[str], now: float
) -> int:
    """Give ``running`` subtasks back to ``pending`` without spending a retry: those of
    ``owners``, or (``owners`` None) those of every owner not in ``live``. Every replica
    is told that the runs have work again."""
    if owners is None:
        guard, params = "NOT (owner = ANY($1::text[]))", list(live)
    else:
        guard, params = "owner = ANY($1::text[])", list(owners)
    sql = f"SELECT DISTINCT run_id FROM subtasks WHERE state = 'running' AND {guard}"
    total = 0
    for (run_id,) in await conn.fetch(sql, params):
        total += await _requeue_run(conn, run_id, owners, live, now)
    return total


async def _requeue_run(
    conn: asyncpg.Connection,
    run_id: str,
    owners: Sequence[str] | None,
    live: Sequence[str],
    now: float,
) -> int:
    async with conn.transaction():
        await lock_runs(conn, [run_id])
        guard = "owner = ANY($3::text[])" if owners is not None else "NOT (owner = ANY($3::text[]))"
        rows = await conn.fetch(
            "UPDATE subtasks SET state = 'pending', owner = NULL, claim_token = NULL, "
            f"updated_at = $2 WHERE run_id = $1 AND state = 'running' AND {guard} "
            "RETURNING task_id",
            run_id,
            now,
            list(owners) if owners is not None else list(live),
        )
        deltas = CounterDeltas()
        moved = deltas.move_each(run_id, (r[0] for r in rows), _S.RUNNING, _S.PENDING)
        await apply_deltas(conn, deltas)
        if moved:
            await notify(conn, [notice(WORK, EVERYONE, run_id)])
    return moved


async def fail_model_work(
    conn: asyncpg.Connection, run_id: str, model_id: str, error: EvalError, now: float
) -> list[str]:
    """Fail the unfinished subtasks of (run, model) permanently; returns the tasks this
    finished."""
    async with conn.transaction():
        await lock_runs(conn, [run_id])
        text = error_json(error)
        rows = await conn.fetch(
            "UPDATE subtasks s SET state = 'failed_permanent', owner = NULL, claim_token = NULL, "
            "updated_at = $3, next_attempt_at = NULL, "
            "first_error = COALESCE(s.first_error, $4), last_error = $4 "
            "FROM subtasks old WHERE old.row_id = s.row_id AND s.run_id = $1 "
            "AND s.model_id = $2 AND s.state IN ('pending', 'failed', 'running') "
            "RETURNING s.task_id, old.state",
            run_id,
            model_id,
            now,
            text,
        )
        deltas = CounterDeltas()
        for task_id, state in rows:
            deltas.move(run_id, task_id, _S(state), _S.FAILED_PERMANENT)
        await apply_deltas(conn, deltas)
        return await finish_ready_tasks(conn, list(deltas.tasks), now)


async def claim_scoring(conn: asyncpg.Connection, task_id: str, owner: str, live: str) -> bool:
    """Take the task's scoring job: free, ours already, or held by a dead scorer."""
    claimed = await conn.fetchval(
        "UPDATE tasks SET scorer = $2 WHERE task_id = $1 AND state = 'scoring' AND "
        "(scorer IS NULL OR scorer = $2 OR NOT EXISTS (SELECT 1 FROM replicas "
        f"WHERE replicas.owner = tasks.scorer AND {live})) RETURNING 1",
        task_id,
        owner,
    )
    return claimed is not None


async def store_executions(conn: asyncpg.Connection, executions: Sequence[ExecutionRow]) -> None:
    """Code samples' runs in the sandbox, each beside its (succeeded) answer."""
    async with conn.transaction():
        await conn.executemany(
            "UPDATE subtasks SET execution = $1 WHERE row_id = $2 AND phase = 0",
            [(e.execution, e.row_id) for e in executions],
        )


async def store_sample_scores(conn: asyncpg.Connection, scores: Sequence[SampleScoreRow]) -> None:
    """Per-sample scores of a page scored before its task's end."""
    async with conn.transaction():
        await _store_scores(conn, scores)


async def _store_scores(conn: asyncpg.Connection, scores: Iterable[SampleScoreRow]) -> None:
    rows = list(score_values(scores))
    if rows:
        await conn.executemany(
            "UPDATE subtasks SET scores = $1, correct = $2, judgement = $3 WHERE row_id = $4",
            rows,
        )


async def finish_task(
    conn: asyncpg.Connection, finish: TaskFinish, retain: int, owner: str
) -> FinishReport:
    """Store a task's result and final state unless another scorer holds its job; end
    the run when it was the last task."""
    async with conn.transaction():
        run_id = await conn.fetchval("SELECT run_id FROM tasks WHERE task_id = $1", finish.task_id)
        if run_id is None:
            return FinishReport(events=(), run_state=None)
        runs = await lock_runs(conn, [run_id])
        updated = await conn.fetchval(
            "UPDATE tasks SET state = $1, result_status = $2, "
            "finished_at = COALESCE(finished_at, $3) WHERE task_id = $4 AND state = 'scoring' "
            "AND (scorer IS NULL OR scorer = $5) RETURNING run_id",
            finish.state.value,
            finish.result_status,
            finish.time,
            finish.task_id,
            owner,
        )
        if updated is None:
            return FinishReport(events=(), run_state=None)  # retried, taken over or finished
        await conn.execute(
            "INSERT INTO results (task_id, run_id, result) VALUES ($1, $2, $3) "
            "ON CONFLICT (task_id) DO UPDATE SET result = EXCLUDED.result",
            finish.task_id,
            run_id,
            dumps(finish.result),
        )
        if finish.clear_scores:
            await conn.execute(
                "UPDATE subtasks SET scores = NULL, correct = NULL "
                "WHERE task_id = $1 AND scores IS NOT NULL",
                finish.task_id,
            )
        await _store_scores(conn, finish.sample_scores)
        tasks = await conn.fetch("SELECT state FROM tasks WHERE run_id = $1", run_id)
        states = [r[0] for r in tasks]
        previous = runs[run_id]
        run_state = run_end(states, cancel_requested=previous["cancel_requested"])
        reason = None
        if run_state is not None:
            reason = await conn.fetchval(
                "UPDATE runs SET state = $2, finished_at = $3 WHERE run_id = $1 "
                "RETURNING cancel_reason",
                run_id,
                run_state.value,
                finish.time,
            )
        new_events = finish_events(finish, run_state, previous["state"], reason)
        events = await append_events(conn, run_id, new_events, retain, owner)
        if run_state is not None:
            await conn.execute(
                "UPDATE runs SET terminal_seq = $2 WHERE run_id = $1", run_id, events[-1].seq
            )
            await notify(conn, [notice(FINISHED, owner, run_id)])
    return FinishReport(events=tuple(events), run_state=run_state)


async def add_events(
    conn: asyncpg.Connection,
    run_id: str,
    events: Sequence[NewEvent],
    retain: int,
    live_only: bool,
    origin: str,
) -> list[EventRow]:
    """Append to the run's log under its lock; ``live_only``: nothing once the run has
    finished."""
    async with conn.transaction():
        row = (await lock_runs(conn, [run_id])).get(run_id)
        if row is None or (live_only and RunState(row["state"]).is_terminal):
            return []  # nothing may follow a run's terminal event
        return await append_events(conn, run_id, events, retain, origin)
