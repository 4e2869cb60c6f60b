"""What the store's operations write, planned once for both dialects.

Each function turns an operation's inputs and the rows it read into what it writes:
counter moves, a new run's rows, judge rows, numbered events, the tasks whose inference
is over, a finished run's state, the cache rows to keep. No SQL, no I/O, no driver
types: the dialects (``store.sqlite``, ``store.postgres``) read, call these, and write
what they return with their own statements and parameter styles. The group commit's
outcome loop is ``_outcomes``; claim assembly is ``_claims``.
"""

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evald_server.domain import (
    Counters,
    EventKind,
    OutcomeKind,
    RetryCounts,
    RunState,
    RunStateChanged,
    SampleFailure,
    SubtaskPhase,
    SubtaskState,
    TaskState,
    can_move,
    inference_finished,
    judge_subtasks_due,
    run_state_if_done,
    task_ready_for_scoring,
    to_jsonable,
)
from evald_server.store._records import (
    CacheEntry,
    EventRow,
    NewEvent,
    NewRun,
    NewTask,
    RescoreTask,
    SampleScoreRow,
    SubtaskOutcome,
    TaskFinish,
    subtask_public_id,
)
from evald_server.store._rows import COUNTER_COLUMNS, Row, counters_from, dumps

_PENDING = SubtaskState.PENDING.value


# --- Counters ---------------------------------------------------------------------------


class CounterDeltas:
    """Per-task and per-run counter changes, applied together in the open transaction
    (``rows``), so the counters always equal a recount of the subtasks they count."""

    def __init__(self) -> None:
        self.tasks: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.runs: defaultdict[str, defaultdict[str, int]] = defaultdict(lambda: defaultdict(int))

    def move(
        self, run_id: str, task_id: str, source: SubtaskState, target: SubtaskState, n: int = 1
    ) -> None:
        if source is target or n == 0:
            return
        if not can_move(source, target):  # a bug in the store, never a client's doing
            raise ValueError(f"a subtask cannot move from {source} to {target}")
        for bucket in (self.tasks[task_id], self.runs[run_id]):
            bucket[source.value] -= n
            bucket[target.value] += n

    def move_each(
        self, run_id: str, task_ids: Iterable[str], source: SubtaskState, target: SubtaskState
    ) -> int:
        """One move per task id seen (one per subtask row moved); returns how many."""
        per_task: dict[str, int] = {}
        for task_id in task_ids:
            per_task[task_id] = per_task.get(task_id, 0) + 1
        for task_id, n in per_task.items():
            self.move(run_id, task_id, source, target, n)
        return sum(per_task.values())

    def add_pending(self, run_id: str, task_id: str, n: int) -> None:
        """New subtasks (a judge phase's), pending: ``total`` and ``pending`` grow."""
        for bucket in (self.tasks[task_id], self.runs[run_id]):
            bucket["total"] += n
            bucket[_PENDING] += n

    def rows(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """(task rows, run rows) to add: each one delta per ``COUNTER_COLUMNS`` then its
        key, in key order (PostgreSQL locks rows in that order), none all zero."""
        return _delta_rows(self.tasks), _delta_rows(self.runs)


def _delta_rows(changes: Mapping[str, Mapping[str, int]]) -> list[tuple[Any, ...]]:
    return [
        (*(changes[key].get(column, 0) for column in COUNTER_COLUMNS), key)
        for key in sorted(changes)
        if any(changes[key].values())
    ]


# --- Runs: creation, state events, the end -----------------------------------------------


def new_run_values(run: NewRun, tasks: Sequence[NewTask]) -> tuple[Any, ...]:
    """(run_id, tenant, name, request_id, request_hash, spec, state, total, pending,
    created_at) of a new run: every subtask of every task pending."""
    total = sum(t.record_count * run.repeat for t in tasks)
    return (
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
    )


def new_task_values(run: NewRun, tasks: Sequence[NewTask]) -> list[tuple[Any, ...]]:
    """(task_id, run_id, ordinal, model_id, model, dataset_id, state, total, pending,
    judge_model_id, judge_rounds) of each new task."""
    return [
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
    ]


def rescore_run_values(run: NewRun, now: float) -> tuple[Any, ...]:
    """(run_id, tenant, name, request_id, request_hash, spec, state, created_at,
    started_at) of a rescored run: running from the start (its answers are in; only
    scoring is left); its counters are set once its answers are copied."""
    return (
        run.run_id,
        run.tenant,
        run.name,
        run.request_id,
        run.request_hash,
        dumps(run.spec),
        RunState.RUNNING.value,
        run.created_at,
        now,
    )


def rescore_task_values(run: NewRun, task: RescoreTask) -> tuple[Any, ...]:
    """(task_id, run_id, ordinal, model_id, model, dataset_id, state, source_task_id)
    of a rescored task: in ``scoring`` at once; its start is its source's."""
    return (
        task.task_id,
        run.run_id,
        task.ordinal,
        task.model_id,
        dumps(task.model),
        task.dataset_id,
        TaskState.SCORING.value,
        task.source_task_id,
    )


def copied_counters(rows: Iterable[Row]) -> dict[str, Counters]:
    """Each rescored task's counters from its copied subtasks read as (task_id, state,
    count): every one terminal."""
    counts: defaultdict[str, dict[str, int]] = defaultdict(dict)
    for task_id, state, count in rows:
        counts[str(task_id)][str(state)] = int(count)
    return {
        task_id: Counters(
            total=sum(by_state.values()),
            succeeded=by_state.get(SubtaskState.SUCCEEDED.value, 0),
            failed_permanent=by_state.get(SubtaskState.FAILED_PERMANENT.value, 0),
            cancelled=by_state.get(SubtaskState.CANCELLED.value, 0),
        )
        for task_id, by_state in counts.items()
    }


def summed_counters(counters: Iterable[Counters]) -> Counters:
    """The run's counters: its tasks' summed."""
    parts = list(counters)
    return Counters(
        total=sum(c.total for c in parts),
        succeeded=sum(c.succeeded for c in parts),
        failed_permanent=sum(c.failed_permanent for c in parts),
        cancelled=sum(c.cancelled for c in parts),
    )


def counter_values(counters: Counters) -> tuple[int, int, int, int]:
    """(total, succeeded, failed_permanent, cancelled) of copied, terminal subtasks."""
    return (counters.total, counters.succeeded, counters.failed_permanent, counters.cancelled)


def rescore_events(now: float) -> list[NewEvent]:
    """A rescored run's first events: created, and running at once."""
    return [
        state_event(RunState.PENDING, now),
        state_event(RunState.RUNNING, now, RunState.PENDING),
    ]


def new_subtask_rows(
    run: NewRun, tasks: Sequence[NewTask]
) -> Iterator[tuple[str, str, str, int, int, str, float]]:
    """A new run's subtasks (``NEW_SUBTASK_COLUMNS``), in run order: task, record,
    repeat. A generator: a 100,000-row run is streamed, never a list in memory."""
    for task in tasks:
        for idx in range(task.record_count):
            for repeat in range(run.repeat):
                yield (
                    run.run_id,
                    task.task_id,
                    task.model_id,
                    idx,
                    repeat,
                    _PENDING,
                    run.created_at,
                )


def state_event(
    state: RunState,
    now: float,
    previous: RunState | None = None,
    *,
    cancel_requested: bool = False,
    retried: int = 0,
    cancel_reason: str | None = None,
) -> NewEvent:
    body = RunStateChanged(state, previous, cancel_requested, retried, cancel_reason)
    return NewEvent(kind=EventKind.RUN_STATE, payload=to_jsonable(body), time=now)


def numbered_events(run_id: str, first_seq: int, events: Iterable[NewEvent]) -> list[EventRow]:
    """Events appended to a run's log from ``first_seq`` on, one seq each."""
    return [
        EventRow(run_id=run_id, seq=first_seq + i, time=e.time, kind=e.kind, payload=e.payload)
        for i, e in enumerate(events)
    ]


def event_values(rows: Iterable[EventRow]) -> list[tuple[str, int, float, str, str]]:
    """(run_id, seq, time, kind, payload) of each event row to insert."""
    return [(r.run_id, r.seq, r.time, r.kind.value, dumps(r.payload)) for r in rows]


def group_by_run(events: Iterable[tuple[str, NewEvent]]) -> dict[str, list[NewEvent]]:
    """Events by run, in run id order (PostgreSQL appends under each run's lock)."""
    grouped: defaultdict[str, list[NewEvent]] = defaultdict(list)
    for run_id, event in events:
        grouped[run_id].append(event)
    return {run_id: grouped[run_id] for run_id in sorted(grouped)}


def cancel_applies(row: Row) -> bool:
    """Whether a cancel changes a run read as (state, cancel_requested, counters…): not
    once it is finished, nor once only scoring is left."""
    return not RunState(row[0]).is_terminal and not inference_finished(counters_from(row, 2))


def cancel_events(row: Row, now: float, reason: str | None) -> list[NewEvent]:
    """The state event of a cancel of a run read as (state, cancel_requested, …): none
    when a restart finishes a cancel requested before."""
    if row[1]:
        return []
    state = RunState(row[0])
    return [state_event(state, now, state, cancel_requested=True, cancel_reason=reason)]


def tasks_to_score(rows: Iterable[Row]) -> list[str]:
    """Of tasks read as (task_id, state, counters…), those whose inference is over and
    that move to ``scoring`` now."""
    return [
        row[0] for row in rows if task_ready_for_scoring(TaskState(row[1]), counters_from(row, 2))
    ]


def run_end(task_states: Iterable[str], *, cancel_requested: bool) -> RunState | None:
    """The run's final state once every task is terminal, else None."""
    states = [TaskState(s) for s in task_states]
    return run_state_if_done(states, cancel_requested=bool(cancel_requested))


def finish_events(
    finish: TaskFinish, run_state: RunState | None, previous: str, cancel_reason: str | None
) -> list[NewEvent]:
    """A task's scored event, and the run's terminal state event when it ended the run."""
    events = [NewEvent(kind=EventKind.TASK_SCORED, payload=finish.event_payload, time=finish.time)]
    if run_state is not None:
        reason = cancel_reason if run_state is RunState.CANCELLED else None
        events.append(state_event(run_state, finish.time, RunState(previous), cancel_reason=reason))
    return events


def score_values(
    scores: Iterable[SampleScoreRow],
) -> Iterator[tuple[str | None, bool | None, str | None, int]]:
    """(scores, correct, judgement, row_id) of each per-sample score row."""
    for s in scores:
        yield (
            None if s.scores is None else dumps({"scores": s.scores, "flags": list(s.flags)}),
            s.correct,
            None if s.judgement is None else dumps(s.judgement),
            s.row_id,
        )


# --- Judge rows ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Answer:
    """A succeeded answer that its task may judge (``ANSWER_COLUMNS``)."""

    row_id: int
    run_id: str
    task_id: str
    record_idx: int
    repeat_index: int


@dataclass(frozen=True, slots=True)
class JudgePlan:
    rows: list[tuple[Any, ...]]  # new judge subtasks, ``JUDGE_SUBTASK_COLUMNS``
    work: list[tuple[str, str]]  # (run, judge model) given work, in order


def judge_rows(
    answers: Iterable[Answer],
    judges: Mapping[str, tuple[str, int]],
    now: float,
    deltas: CounterDeltas,
    *,
    cancelling: frozenset[str] | set[str] = frozenset(),
) -> JudgePlan:
    """The judge subtasks that succeeded answers call for (``judges``: task id → (judge
    model, rounds) of the judged tasks), pending, counted into ``deltas``; none for an
    answer of a run in ``cancelling``. The outcome that records an answer and the retry
    that lifts a cancel both call this."""
    rows: list[tuple[Any, ...]] = []
    for answer in answers:
        model_id, rounds = judges.get(answer.task_id, ("", 0))
        due = judge_subtasks_due(
            OutcomeKind.SUCCEEDED,
            SubtaskPhase.ANSWER,
            rounds,
            cancel_requested=answer.run_id in cancelling,
        )
        rows.extend(
            (
                answer.run_id,
                answer.task_id,
                model_id,
                answer.record_idx,
                answer.repeat_index,
                _PENDING,
                now,
                int(SubtaskPhase.JUDGE),
                answer.row_id,
                judge_round,
            )
            for judge_round in range(due)
        )
        if due:
            deltas.add_pending(answer.run_id, answer.task_id, due)
    return JudgePlan(rows, sorted({(row[0], row[2]) for row in rows}))


# --- Failure events -------------------------------------------------------------------------


def failure_event(outcome: SubtaskOutcome, row: Row, now: float) -> NewEvent:
    """The event of a permanent failure, from its outcome and its subtask read with
    ``FAILURE_COLUMNS`` after the outcome was written."""
    assert outcome.error is not None
    requests, record_id, *failed = tuple(row)
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


# --- The response cache ------------------------------------------------------------------

# Which entries go first beyond the bound: the least recently used (then by key).
EVICTION_ORDER = "used_at DESC, key"


def cache_rows(entries: Iterable[CacheEntry], now: float) -> list[tuple[Any, ...]]:
    """(scope, key, output, finish_reason, prompt_tokens, completion_tokens, created_at,
    used_at) to keep: one per (scope, key), the last one given, in key order (puts of
    several replicas lock rows in the same order)."""
    latest = {(e.scope, e.key): e for e in entries}
    return [
        (
            e.scope,
            e.key,
            e.answer.output,
            e.answer.finish_reason,
            e.answer.prompt_tokens,
            e.answer.completion_tokens,
            now,
            now,
        )
        for _, e in sorted(latest.items())
    ]
