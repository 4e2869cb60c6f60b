"""The hot path in SQL: create a run with all its subtasks, and record outcomes.

Counters move in the same transaction as the subtask rows they count, so a recount from
the subtasks always equals them. Outcomes are applied only to rows still ``running``
under this owner: a row that a cancel or a restart took back is never overwritten.
"""

import sqlite3
from collections import defaultdict
from collections.abc import Iterator, Sequence

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
from evald_server.store._errors import LiveRunLimitReached
from evald_server.store._records import (
    COUNTER_COLUMNS,
    CompletionReport,
    NewEvent,
    NewRun,
    NewTask,
    RetryScheduled,
    RunRow,
    SubtaskOutcome,
    subtask_public_id,
)
from evald_server.store._sql_common import (
    CounterDeltas,
    append_events,
    dumps,
    error_json,
    group_by_run,
    read_run,
    state_event,
    transaction,
)

_S = SubtaskState


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
        if run.request_id is not None:
            found = conn.execute(
                "SELECT run_id FROM runs WHERE tenant = ? AND request_id = ?",
                (run.tenant, run.request_id),
            ).fetchone()
            if found is not None:
                existing = read_run(conn, found[0])
                assert existing is not None
                return existing, False
        if max_live_runs is not None:
            (live,) = conn.execute(
                "SELECT COUNT(*) FROM runs WHERE tenant = ? AND state IN (?, ?)",
                (run.tenant, RunState.PENDING.value, RunState.RUNNING.value),
            ).fetchone()
            if live >= max_live_runs:
                raise LiveRunLimitReached(live, max_live_runs)
        total = sum(t.record_count * run.repeat for t in tasks)
        conn.execute(
            "INSERT INTO runs (run_id, tenant, name, request_id, request_hash, spec, state, "
            "total, pending, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run.run_id,
                run.tenant,
                run.name,
                run.request_id,
                run.request_hash,
                dumps(run.spec),
                RunState.PENDING.value,
                total,
                total,
                run.created_at,
            ),
        )
        conn.executemany(
            "INSERT INTO tasks (task_id, run_id, ordinal, model_id, model, dataset_id, state, "
            "total, pending, judge_model_id, judge_rounds) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    t.task_id,
                    run.run_id,
                    t.ordinal,
                    t.model_id,
                    dumps(t.model),
                    t.dataset_id,
                    TaskState.PENDING.value,
                    t.record_count * run.repeat,
                    t.record_count * run.repeat,
                    t.judge_model_id,
                    t.judge_rounds,
                )
                for t in tasks
            ],
        )
        conn.executemany(
            "INSERT INTO subtasks (run_id, task_id, model_id, record_idx, repeat_index, state, "
            "updated_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)",
            _subtask_rows(run, tasks),
        )
        append_events(conn, run.run_id, [state_event(RunState.PENDING, run.created_at)], retain)
        created = read_run(conn, run.run_id)
    assert created is not None
    return created, True


def _subtask_rows(
    run: NewRun, tasks: Sequence[NewTask]
) -> Iterator[tuple[str, str, str, int, int, float]]:
    # A generator: executemany streams it, so a 100,000-row run is never a list in memory.
    for task in tasks:
        for idx in range(task.record_count):
            for repeat in range(run.repeat):
                yield (run.run_id, task.task_id, task.model_id, idx, repeat, run.created_at)


_TARGET_VALUE = {kind: state.value for kind, state in OUTCOME_TARGET.items()}
_TERMINAL = frozenset(s for s in _S if s.is_terminal)

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


def complete(
    conn: sqlite3.Connection,
    outcomes: Sequence[SubtaskOutcome],
    owner: str,
    now: float,
    retain: int,
) -> CompletionReport:
    """Record a batch of outcomes in one transaction (the group commit)."""
    with transaction(conn):
        run_ids = sorted({o.run_id for o in outcomes})
        placeholders = ",".join("?" * len(run_ids))
        cancelling = {
            row[0]
            for row in conn.execute(
                f"SELECT run_id FROM runs WHERE run_id IN ({placeholders}) "
                "AND cancel_requested = 1",
                run_ids,
            )
        }
        marks = ",".join("?" * len(outcomes))
        owned = {
            row[0]
            for row in conn.execute(
                f"SELECT row_id FROM subtasks WHERE row_id IN ({marks}) "
                "AND state = 'running' AND owner = ?",
                [*(o.row_id for o in outcomes), owner],
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
                continue  # taken back by a cancel or a restart: not ours any more
            kind = effective_outcome(outcome.kind, cancel_requested=outcome.run_id in cancelling)
            target = OUTCOME_TARGET[kind]
            spent = spends_attempt(kind, attempted=outcome.attempted)
            error = error_json(outcome.error)
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
                    outcome.output,
                    outcome.prompt_tokens,
                    outcome.completion_tokens,
                    outcome.latency_s,
                    outcome.ttft_s,
                    error,
                    error,
                    None if outcome.top_logprobs is None else dumps(outcome.top_logprobs),
                    outcome.finish_reason,
                    int(failed is RetryClass.RATE_LIMITED),
                    int(failed is RetryClass.TIMEOUT),
                    int(failed is RetryClass.TRANSIENT),
                    None if cost is None or not cost.priced else cost.picousd,
                    None if cost is None else cost.tokens,
                    int(cost is not None and cost.estimated),
                    outcome.verdict,
                    int(outcome.cache_hit and kind is OutcomeKind.SUCCEEDED),
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
        conn.executemany(_UPDATE_OUTCOME, updates)
        conn.executemany(
            _ADD_RUN_COST,
            [(c.picousd, c.tokens, int(c.estimated), r) for r, c in run_costs.items()],
        )
        deltas = CounterDeltas()
        for (run_id, task_id, target), count in moved.items():
            deltas.move(run_id, task_id, _S.RUNNING, target, count)
        judge_work = _create_judge_subtasks(conn, judged, cancelling, deltas, now)
        events = [(o.run_id, _failure_event(conn, o, now)) for o in failures]
        applied = len(updates)
        deltas.apply(conn)
        finished = finish_ready_tasks(conn, list(deltas.tasks), now)
        appended = []
        for run_id, run_events in group_by_run(events).items():
            appended.extend(append_events(conn, run_id, run_events, retain))
    return CompletionReport(
        applied=applied,
        finished_tasks=tuple(finished),
        retries=tuple(retries),
        completed_per_run=completed,
        events=tuple(appended),
        judge_work=tuple(judge_work),
    )


def _create_judge_subtasks(
    conn: sqlite3.Connection,
    answers: Sequence[SubtaskOutcome],
    cancelling: set[str],
    deltas: CounterDeltas,
    now: float,
) -> list[tuple[str, str]]:
    """Insert the judge subtasks that the succeeded answers call for (pending, counted
    in their task and run); returns the (run, judge model) pairs that got work."""
    if not answers:
        return []
    task_ids = sorted({o.task_id for o in answers})
    marks = ",".join("?" * len(task_ids))
    judges = {
        row[0]: (row[1], int(row[2]))
        for row in conn.execute(
            f"SELECT task_id, judge_model_id, judge_rounds FROM tasks WHERE task_id IN ({marks}) "
            "AND judge_rounds > 0",
            task_ids,
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
                    model_id,
                    outcome.record_idx,
                    outcome.repeat_index,
                    now,
                    int(SubtaskPhase.JUDGE),
                    outcome.row_id,
                    judge_round,
                )
            )
        if due:
            deltas.add_pending(outcome.run_id, outcome.task_id, due)
    conn.executemany(
        "INSERT INTO subtasks (run_id, task_id, model_id, record_idx, repeat_index, state, "
        "updated_at, phase, judged_row_id, judge_round) "
        "VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
        rows,
    )
    return sorted({(row[0], str(row[2])) for row in rows})


def _failure_event(conn: sqlite3.Connection, outcome: SubtaskOutcome, now: float) -> NewEvent:
    assert outcome.error is not None
    requests, record_id, *failed = conn.execute(
        "SELECT s.requests, r.record_id, s.failed_rate_limited, s.failed_timeout, "
        "s.failed_transient FROM subtasks s JOIN tasks t ON t.task_id = s.task_id "
        "JOIN dataset_records r ON r.dataset_id = t.dataset_id AND r.idx = s.record_idx "
        "WHERE s.row_id = ?",
        (outcome.row_id,),
    ).fetchone()
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
        record_id=record_id,
        record_idx=outcome.record_idx,
        repeat_index=outcome.repeat_index,
        attempts=requests,
        error=outcome.error,
        failures=RetryCounts(*failed),
    )
    return NewEvent(kind=EventKind.SAMPLE_FAILED, payload=to_jsonable(failure), time=now)


def finish_ready_tasks(conn: sqlite3.Connection, task_ids: Sequence[str], now: float) -> list[str]:
    """Move tasks whose inference is finished to ``scoring``; return their ids."""
    finished = []
    for task_id in task_ids:
        row = conn.execute(
            f"SELECT state, {', '.join(COUNTER_COLUMNS)} FROM tasks WHERE task_id = ?", (task_id,)
        ).fetchone()
        if row is None or not task_ready_for_scoring(TaskState(row[0]), Counters(*row[1:])):
            continue
        conn.execute(
            "UPDATE tasks SET state = 'scoring', finished_at = ? WHERE task_id = ?", (now, task_id)
        )
        finished.append(task_id)
    return finished
