"""Rows as both dialects select them: the column lists, and the decoders that turn a row
read back into a record; the JSON text of the JSON columns.

A dialect writes its own SQL around these column lists (its placeholders, its functions)
and hands each row it reads, a tuple or a driver record indexed the same way, to the
decoder here. Booleans decode alike whether the database kept integers (SQLite) or
booleans (PostgreSQL).
"""

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from evald_server.domain import (
    Cost,
    Counters,
    EvalError,
    EventKind,
    RetryCounts,
    RunState,
    SubtaskPhase,
    SubtaskState,
    TaskState,
    TaskType,
)
from evald_server.store._records import (
    CachedAnswer,
    DatasetRow,
    EventRow,
    Json,
    JudgeVerdictRow,
    RecordRow,
    RunRow,
    StateCounts,
    SubtaskRow,
    TaskOutput,
    TaskRow,
)

Row = Sequence[Any]  # a tuple, or a driver record indexed like one

COUNTER_COLUMNS: tuple[str, ...] = (
    "total",
    "pending",
    "running",
    "succeeded",
    "failed",
    "failed_permanent",
    "cancelled",
)
STATE_COLUMNS: tuple[str, ...] = COUNTER_COLUMNS[1:]  # one counter per subtask state


def dumps(value: Any) -> str:
    """The stored JSON text of a value: compact, keys sorted."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def loads_json(text: str | None) -> Json | None:
    return None if text is None else dict(json.loads(text))


def error_json(error: EvalError | None) -> str | None:
    return None if error is None else dumps(error.to_json())


def error_from(text: str | None) -> EvalError | None:
    return None if text is None else EvalError.from_json(json.loads(text))


def counters_from(row: Row, start: int = 0) -> Counters:
    """Counters from ``COUNTER_COLUMNS`` read at ``start``."""
    return Counters(*(int(v) for v in row[start : start + len(COUNTER_COLUMNS)]))


def recounted(counts: Mapping[str, int]) -> Counters:
    """Counters from (state value → count) of the subtasks themselves."""
    values = {c: int(counts.get(c, 0)) for c in STATE_COLUMNS}
    return Counters(total=sum(values.values()), **values)


# Runs: ``RUN_COLUMNS`` then ``OLDEST_SEQ``, selected ``FROM runs r``.
_COUNTERS_SQL = ", ".join(COUNTER_COLUMNS)
RUN_COLUMNS = (
    "run_id, tenant, name, spec, state, cancel_requested, "
    f"{_COUNTERS_SQL}, created_at, started_at, finished_at, last_seq, terminal_seq, "
    "request_id, request_hash, cost_picousd, cost_tokens, cost_estimated, cancel_reason"
)
OLDEST_SEQ = "(SELECT MIN(seq) FROM events e WHERE e.run_id = r.run_id)"
RUNS_FROM = f"SELECT {RUN_COLUMNS}, {OLDEST_SEQ} FROM runs r"
_LAST_SEQ = 9 + len(COUNTER_COLUMNS)


def run_from(row: Row) -> RunRow:
    """A run selected with ``RUNS_FROM`` (its oldest retained seq last)."""
    n = len(COUNTER_COLUMNS)
    oldest = row[17 + n]
    return RunRow(
        run_id=row[0],
        tenant=row[1],
        name=row[2],
        spec=json.loads(row[3]),
        state=RunState(row[4]),
        cancel_requested=bool(row[5]),
        counters=counters_from(row, 6),
        created_at=row[6 + n],
        started_at=row[7 + n],
        finished_at=row[8 + n],
        last_seq=int(row[_LAST_SEQ]),
        terminal_seq=row[10 + n],
        oldest_seq=int(oldest) if oldest is not None else int(row[_LAST_SEQ]) + 1,
        request_id=row[11 + n],
        request_hash=row[12 + n],
        cost=Cost(picousd=int(row[13 + n]), tokens=int(row[14 + n]), estimated=bool(row[15 + n])),
        cancel_reason=row[16 + n],
    )


# Tasks, with their dataset's name, version and task type.
TASK_COLUMNS = (
    "t.task_id, t.run_id, t.ordinal, t.model_id, t.model, t.dataset_id, t.state, "
    + ", ".join(f"t.{c}" for c in COUNTER_COLUMNS)
    + ", t.started_at, t.finished_at, t.result_status, d.name, d.benchmark_version, d.task_type"
)
TASKS_FROM = "FROM tasks t JOIN datasets d ON d.dataset_id = t.dataset_id"
# A task's state and counters, to decide whether its inference is over.
TASK_PROGRESS_COLUMNS = f"task_id, state, {_COUNTERS_SQL}"


def task_from(row: Row) -> TaskRow:
    n = len(COUNTER_COLUMNS)
    return TaskRow(
        task_id=row[0],
        run_id=row[1],
        ordinal=int(row[2]),
        model_id=row[3],
        model=json.loads(row[4]),
        dataset_id=row[5],
        state=TaskState(row[6]),
        counters=counters_from(row, 7),
        started_at=row[7 + n],
        finished_at=row[8 + n],
        result_status=row[9 + n],
        dataset_name=row[10 + n],
        dataset_version=row[11 + n],
        task_type=TaskType(row[12 + n]),
    )


# Datasets and their records.
DATASET_COLUMNS = (
    "dataset_id, tenant, name, benchmark_version, task_type, sha256, record_count, "
    "prompt_template, created_at, request_id, request_hash, size_bytes, prompt_options"
)


def dataset_values(dataset: DatasetRow) -> tuple[Any, ...]:
    """A dataset's values in ``DATASET_COLUMNS`` order."""
    return (
        dataset.dataset_id,
        dataset.tenant,
        dataset.name,
        dataset.benchmark_version,
        dataset.task_type.value,
        dataset.content_sha256,
        dataset.record_count,
        dataset.prompt_template,
        dataset.created_at,
        dataset.request_id,
        dataset.request_hash,
        dataset.size_bytes,
        None if dataset.prompt_options is None else dumps(dataset.prompt_options),
    )


def dataset_from(row: Row) -> DatasetRow:
    return DatasetRow(
        dataset_id=row[0],
        tenant=row[1],
        name=row[2],
        benchmark_version=row[3],
        task_type=TaskType(row[4]),
        content_sha256=row[5],
        record_count=int(row[6]),
        prompt_template=row[7],
        created_at=row[8],
        request_id=row[9],
        request_hash=row[10],
        size_bytes=int(row[11]),
        prompt_options=None if row[12] is None else json.loads(row[12]),
    )


RECORD_COLUMNS = ("dataset_id", "idx", "record_id", "fields")


def record_values(dataset_id: str, records: Iterable[RecordRow]) -> Iterable[tuple[Any, ...]]:
    """Records in ``RECORD_COLUMNS`` order, one at a time (an upload is streamed)."""
    return ((dataset_id, r.idx, r.record_id, dumps(r.fields)) for r in records)


def record_from(row: Row) -> RecordRow:
    """A record selected as (idx, record_id, fields)."""
    return RecordRow(idx=row[0], record_id=row[1], fields=json.loads(row[2]))


def event_from(run_id: str, row: Row) -> EventRow:
    """An event selected as (seq, time, kind, payload)."""
    return EventRow(
        run_id=run_id, seq=row[0], time=row[1], kind=EventKind(row[2]), payload=json.loads(row[3])
    )


# Subtasks with their records (``SUBTASKS_FROM``), for scoring, profiles and ListSamples.
SUBTASKS_FROM = (
    "FROM subtasks s JOIN tasks t ON t.task_id = s.task_id "
    "JOIN dataset_records r ON r.dataset_id = t.dataset_id AND r.idx = s.record_idx"
)
SUBTASK_COLUMNS = (
    "s.row_id, s.task_id, s.record_idx, s.repeat_index, s.state, s.attempt, s.requests, "
    "s.rate_limited, s.next_attempt_at, s.output, s.prompt_tokens, s.completion_tokens, "
    "s.latency_s, s.ttft_s, s.call_time_s, s.first_error, s.last_error, r.record_id, r.fields, "
    "s.scores, s.correct, s.updated_at, s.run_id, s.model_id, s.finish_reason, "
    "s.failed_rate_limited, s.failed_timeout, s.failed_transient, s.cost_picousd, s.cost_tokens, "
    "s.cost_estimated, s.phase, s.judge_round, s.verdict, s.judgement, s.cache_hit, "
    "s.answer_flags, s.execution"
)
SUBTASK_COLUMN_COUNT = 38  # of SUBTASK_COLUMNS; a cut output's full size may follow them


def cost_from(pico: int | None, tokens: int | None, estimated: Any) -> Cost | None:
    if tokens is None:
        return None  # no success yet (or stored before evald counted cost)
    return Cost(
        picousd=pico or 0, tokens=int(tokens), estimated=bool(estimated), priced=pico is not None
    )


def subtask_from(row: Row) -> SubtaskRow:
    """A subtask selected with ``SUBTASK_COLUMNS`` (and, optionally, its output's size)."""
    scored = loads_json(row[19])
    return SubtaskRow(
        row_id=row[0],
        task_id=row[1],
        record_idx=row[2],
        repeat_index=row[3],
        state=SubtaskState(row[4]),
        attempt=row[5],
        requests=row[6],
        rate_limited=row[7],
        next_attempt_at=row[8],
        output=row[9],
        prompt_tokens=row[10],
        completion_tokens=row[11],
        latency_s=row[12],
        ttft_s=row[13],
        call_time_s=row[14],
        first_error=error_from(row[15]),
        last_error=error_from(row[16]),
        record_id=row[17],
        fields=json.loads(row[18]),
        scores=None if scored is None else {k: float(v) for k, v in scored["scores"].items()},
        flags=() if scored is None else tuple(scored.get("flags", ())),
        correct=None if row[20] is None else bool(row[20]),
        updated_at=row[21],
        run_id=row[22],
        model_id=row[23],
        finish_reason=row[24],
        failures=RetryCounts(row[25], row[26], row[27]),
        cost=cost_from(row[28], row[29], row[30]),
        phase=SubtaskPhase(row[31]),
        judge_round=row[32],
        verdict=row[33],
        judgement=loads_json(row[34]),
        cache_hit=bool(row[35]),
        answer_flags=() if row[36] is None else tuple(json.loads(row[36])),
        execution=loads_json(row[37]),
        output_bytes=row[SUBTASK_COLUMN_COUNT] if len(row) > SUBTASK_COLUMN_COUNT else None,
    )


# Succeeded answers with their records, for scoring (``SUBTASKS_FROM``).
OUTPUT_COLUMNS = (
    "s.row_id, s.record_idx, s.repeat_index, r.record_id, r.fields, s.output, s.top_logprobs, "
    "s.execution"
)


def outputs_from(rows: Iterable[Row]) -> list[TaskOutput]:
    """Outputs selected with ``OUTPUT_COLUMNS`` in row order. Lean on purpose: scoring
    reads every output of a task, and the records stay JSON text (the scoring worker
    decodes them); a record's repeats, adjacent, share one copy of its text."""
    outputs = []
    last_idx, last_fields = -1, ""
    for row_id, idx, repeat, record_id, fields, output, logprobs, execution in rows:
        if idx != last_idx:
            last_idx, last_fields = idx, fields
        top = None if logprobs is None else tuple((t, float(p)) for t, p in json.loads(logprobs))
        outputs.append(
            TaskOutput(row_id, idx, repeat, record_id, last_fields, output or "", top, execution)
        )
    return outputs


def verdict_from(row: Row) -> JudgeVerdictRow:
    """A judge subtask selected as (row_id, judged_row_id, record_idx, judge_round,
    state, verdict, output, its last error's reason)."""
    return JudgeVerdictRow(
        row[0], row[1], row[2], row[3], SubtaskState(row[4]), row[5], row[6], row[7]
    )


def results_from(rows: Iterable[Row]) -> list[tuple[str, Json]]:
    """(task id, result) pairs selected as (task_id, result)."""
    return [(r[0], json.loads(r[1])) for r in rows]


def state_counts_from(runs: Iterable[Row], tasks: Iterable[Row], sums: Row) -> StateCounts:
    """Runs and tasks by state (rows of (state, count)) and the tasks' ``STATE_COLUMNS``
    summed (the subtasks by state: the counters move with every outcome)."""
    return StateCounts(
        runs={str(r[0]): int(r[1]) for r in runs},
        tasks={str(r[0]): int(r[1]) for r in tasks},
        subtasks={state: int(value) for state, value in zip(STATE_COLUMNS, sums, strict=True)},
    )


# A new subtask row (a run's, inserted with it), and a judge subtask's (created for a
# succeeded answer): ``plans.new_subtask_rows`` and ``plans.judge_rows`` in this order.
NEW_SUBTASK_COLUMNS: tuple[str, ...] = (
    "run_id",
    "task_id",
    "model_id",
    "record_idx",
    "repeat_index",
    "state",
    "updated_at",
)
# What a rescored run copies of each terminal answer of its source task (``RescoreTask``):
# everything the answer and its execution profile are read from; not its owner, retry
# time, scores or judgement (the rescore computes its own).
COPIED_SUBTASK_COLUMNS: tuple[str, ...] = (
    "model_id",
    "record_idx",
    "repeat_index",
    "state",
    "attempt",
    "requests",
    "rate_limited",
    "output",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "ttft_s",
    "call_time_s",
    "first_error",
    "last_error",
    "updated_at",
    "finish_reason",
    "top_logprobs",
    "failed_rate_limited",
    "failed_timeout",
    "failed_transient",
    "cost_picousd",
    "cost_tokens",
    "cost_estimated",
    "cache_hit",
    "answer_flags",
)
COPIED_STATES = ("succeeded", "failed_permanent", "cancelled")
# What it copies of each judge subtask that graded a copied answer: the judge's call and
# its verdict, so the rescored task's judge metrics come back without a judge call. The
# copy's ``judged_row_id`` is the copied answer's row (same record and repeat).
COPIED_JUDGE_COLUMNS: tuple[str, ...] = (
    *(c for c in COPIED_SUBTASK_COLUMNS if c != "top_logprobs"),
    "phase",
    "judge_round",
    "verdict",
)
COPIED_JUDGE_SELECT = ", ".join(f"j.{c}" for c in COPIED_JUDGE_COLUMNS)  # FROM subtasks j


def copied_select(keep_logprobs: bool) -> str:
    """The select list of ``COPIED_SUBTASK_COLUMNS`` from a source subtask (its
    log-probabilities left out unless ``keep_logprobs``)."""
    return ", ".join(
        "NULL" if c == "top_logprobs" and not keep_logprobs else c for c in COPIED_SUBTASK_COLUMNS
    )


JUDGE_SUBTASK_COLUMNS: tuple[str, ...] = (
    *NEW_SUBTASK_COLUMNS,
    "phase",
    "judged_row_id",
    "judge_round",
)
# A succeeded answer that may be judged (``plans.Answer``), selected ``FROM subtasks a``;
# those of judged tasks that no judge subtask grades yet (they succeeded after their
# run's cancel), ``UNJUDGED_FROM``, filtered further on ``t`` (their task).
ANSWER_COLUMNS = "a.row_id, a.run_id, a.task_id, a.record_idx, a.repeat_index"
UNJUDGED_FROM = (
    "FROM subtasks a JOIN tasks t ON t.task_id = a.task_id WHERE t.judge_rounds > 0 "
    "AND a.phase = 0 AND a.state = 'succeeded' "
    "AND NOT EXISTS (SELECT 1 FROM subtasks j WHERE j.judged_row_id = a.row_id)"
)


def judges_from(rows: Iterable[Row]) -> dict[str, tuple[str, int]]:
    """Task id → (judge model, rounds), selected as (task_id, judge_model_id, judge_rounds)."""
    return {r[0]: (str(r[1]), int(r[2])) for r in rows}


# What a claim returns of each subtask it moved to running.
CLAIMED_COLUMNS = (
    "row_id, task_id, record_idx, repeat_index, attempt, phase, judge_round, judged_row_id, "
    "failed_rate_limited, failed_timeout, failed_transient"
)
# What a permanent failure's event reads of its subtask (``SUBTASKS_FROM``).
FAILURE_COLUMNS = (
    "s.requests, r.record_id, s.failed_rate_limited, s.failed_timeout, s.failed_transient"
)
# A response-cache hit.
CACHED_COLUMNS = "key, output, finish_reason, prompt_tokens, completion_tokens"


def cached_from(rows: Iterable[Row]) -> dict[str, CachedAnswer]:
    """Cache hits selected with ``CACHED_COLUMNS``, by key."""
    return {r[0]: CachedAnswer(r[1], r[2], r[3], r[4]) for r in rows}
