"""What the store reads and writes: plain rows, outcomes and reports.

These are persistence records, not API objects: JSON columns stay ``dict``s here and the
engine and the application layer give them meaning. Times are Unix epoch seconds
(``time.time()``), because retry times must survive a restart.
"""

from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from evald_server.domain import (
    Cost,
    Counters,
    EvalError,
    EventKind,
    OutcomeKind,
    RetryClass,
    RetryCounts,
    RunState,
    SubtaskPhase,
    SubtaskState,
    TaskState,
    TaskType,
)

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class StateCounts:
    """Runs, tasks and subtasks by state, over every tenant (state value → count)."""

    runs: Mapping[str, int]
    tasks: Mapping[str, int]
    subtasks: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class DatasetRow:
    dataset_id: str
    tenant: str
    name: str
    benchmark_version: str
    task_type: TaskType
    content_sha256: str
    record_count: int
    prompt_template: str | None
    created_at: float
    request_id: str | None = None
    request_hash: str | None = None
    size_bytes: int = 0
    prompt_options: Json | None = None  # PromptOptions.to_json(); None: zero-shot


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One dataset record as stored: its position, its id and its fields."""

    idx: int
    record_id: str
    fields: Json


@dataclass(frozen=True, slots=True)
class NewTask:
    """A task to insert with its run: one model × one dataset."""

    task_id: str
    ordinal: int
    model_id: str
    model: Json  # model identity with effective generation params, frozen at creation
    dataset_id: str
    record_count: int
    # Model-graded scoring: each succeeded answer gets ``judge_rounds`` judge subtasks
    # on ``judge_model_id`` (none when 0).
    judge_model_id: str | None = None
    judge_rounds: int = 0


@dataclass(frozen=True, slots=True)
class RescoreTask:
    """A task of a rescored run: a new task over a copy of a finished source task's
    answers (every terminal answer subtask, its output, usage and errors), scored
    again without a provider call. ``keep_logprobs`` False drops the answers'
    log-probabilities (the rescore reads the text)."""

    task_id: str
    ordinal: int
    model_id: str
    model: Json  # the source task's model identity, its judge included
    dataset_id: str
    source_task_id: str
    keep_logprobs: bool = True


@dataclass(frozen=True, slots=True)
class NewRun:
    run_id: str
    tenant: str
    name: str
    spec: Json
    repeat: int
    created_at: float
    request_id: str | None = None
    request_hash: str | None = None


@dataclass(frozen=True, slots=True)
class RunRow:
    run_id: str
    tenant: str
    name: str
    spec: Json
    state: RunState
    cancel_requested: bool
    counters: Counters
    created_at: float
    started_at: float | None
    finished_at: float | None
    last_seq: int
    terminal_seq: int | None
    oldest_seq: int  # oldest retained event seq (last_seq + 1 when the log is empty)
    request_id: str | None = None
    request_hash: str | None = None
    # What its successful calls cost so far (``priced`` is the tasks' business: the
    # store does not know prices), and why the server cancelled it, if it did.
    cost: Cost = field(default_factory=Cost)
    cancel_reason: str | None = None


@dataclass(frozen=True, slots=True)
class TaskRow:
    task_id: str
    run_id: str
    ordinal: int
    model_id: str
    model: Json
    dataset_id: str
    state: TaskState
    counters: Counters
    started_at: float | None
    finished_at: float | None
    result_status: str | None
    dataset_name: str
    dataset_version: str
    task_type: TaskType


@dataclass(frozen=True, slots=True)
class ClaimedSubtask:
    """A subtask moved to ``running`` by a claim, with what is needed to call the model."""

    row_id: int
    run_id: str
    task_id: str
    model_id: str
    record_idx: int
    repeat_index: int
    attempt: int
    record_id: str
    fields: Json
    dataset_id: str
    failures: RetryCounts = field(
        default_factory=RetryCounts
    )  # failed attempts per class since queued
    phase: SubtaskPhase = SubtaskPhase.ANSWER
    judge_round: int = 0  # judge subtasks: which judging round of the answer
    answer: str | None = None  # judge subtasks: the answer being graded

    @property
    def subtask_id(self) -> str:
        return subtask_public_id(
            self.task_id, self.record_idx, self.repeat_index, self.phase, self.judge_round
        )


def subtask_public_id(
    task_id: str,
    record_idx: int,
    repeat_index: int,
    phase: SubtaskPhase = SubtaskPhase.ANSWER,
    judge_round: int = 0,
) -> str:
    """The stable public id of a subtask (also the provider's request key); a judge
    subtask's is its answer's with ``.j<round>``."""
    base = f"{task_id}.{record_idx}.{repeat_index}"
    return base if phase is SubtaskPhase.ANSWER else f"{base}.j{judge_round}"


@dataclass(frozen=True, slots=True)
class Claim:
    """The result of one claim: the subtasks, and when the next retry falls due."""

    subtasks: tuple[ClaimedSubtask, ...]
    exhausted: bool  # nothing pending is left for this (run, model)
    next_retry_at: float | None  # earliest next_attempt_at of waiting retries, if any
    events: tuple["EventRow", ...] = ()


@dataclass(frozen=True, slots=True)
class SubtaskOutcome:
    """The result of one attempt (or non-attempt) on a claimed subtask."""

    row_id: int
    run_id: str
    task_id: str
    model_id: str
    record_idx: int
    repeat_index: int
    kind: OutcomeKind
    attempted: bool = True
    output: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    ttft_s: float | None = None
    call_time_s: float = 0.0
    error: EvalError | None = None
    next_attempt_at: float | None = None
    rate_limited: bool = False
    # The first token's (token, log-probability) alternatives, when they were asked for.
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    finish_reason: str | None = None  # with an output: why generation stopped
    retry_class: RetryClass | None = None  # a retryable failure: the budget it spends
    cost: Cost | None = None  # a success: what it cost (tokens and, if priced, money)
    phase: SubtaskPhase = SubtaskPhase.ANSWER
    judge_round: int = 0
    verdict: float | None = None  # a judge subtask's parsed score
    cache_hit: bool = False  # answered from the response cache, no provider call
    # A success: what its provider sent outside evald's bounds (providers._answer_bounds).
    answer_flags: tuple[str, ...] = ()
    # The response-cache entry this answer may fill (engine bookkeeping; not stored).
    cache_key: str | None = None
    # Provider calls the attempt made (added to the row's ``requests``): one, or one per
    # choice for loglikelihood scoring.
    calls: int = 1


@dataclass(frozen=True, slots=True)
class RetryScheduled:
    run_id: str
    model_id: str
    next_attempt_at: float


@dataclass(frozen=True, slots=True)
class CompletionReport:
    """What one committed batch of outcomes changed."""

    applied: int
    finished_tasks: tuple[str, ...]  # tasks moved to ``scoring`` by this batch
    retries: tuple[RetryScheduled, ...]
    completed_per_run: Mapping[str, int]  # newly terminal subtasks per run
    events: tuple["EventRow", ...]
    judge_work: tuple[tuple[str, str], ...] = ()  # (run, judge model) given new work


@dataclass(frozen=True, slots=True)
class TransitionReport:
    """What a cancel or a retry changed."""

    changed: int
    finished_tasks: tuple[str, ...]
    events: tuple["EventRow", ...]
    models: tuple[str, ...] = ()  # models with work again (retry)


@dataclass(frozen=True, slots=True)
class NewEvent:
    kind: EventKind
    payload: Json
    time: float


@dataclass(frozen=True, slots=True)
class EventRow:
    run_id: str
    seq: int
    time: float
    kind: EventKind
    payload: Json


@dataclass(frozen=True, slots=True)
class SubtaskRow:
    """One subtask as read back (scoring input, profile, ListSamples)."""

    row_id: int
    task_id: str
    record_idx: int
    repeat_index: int
    state: SubtaskState
    attempt: int
    requests: int
    rate_limited: int
    next_attempt_at: float | None
    output: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    ttft_s: float | None
    call_time_s: float
    first_error: EvalError | None
    last_error: EvalError | None
    record_id: str
    fields: Json
    scores: dict[str, float] | None = None
    flags: tuple[str, ...] = ()
    correct: bool | None = None
    updated_at: float = 0.0
    run_id: str = ""
    model_id: str = ""
    finish_reason: str | None = None
    output_bytes: int | None = None  # the full output's size, where the read cut it
    failures: RetryCounts = field(
        default_factory=RetryCounts
    )  # failed attempts per class since queued
    cost: Cost | None = None  # a success's cost (None before, or stored before evald kept it)
    phase: SubtaskPhase = SubtaskPhase.ANSWER
    judge_round: int = 0
    verdict: float | None = None  # judge subtasks: the parsed score
    judgement: Json | None = None  # answers of a judged task, once scored
    cache_hit: bool = False
    answer_flags: tuple[str, ...] = ()  # what the provider sent outside evald's bounds
    # A code sample's run in the sandbox (its JSON); None before it ran, other tasks.
    execution: Json | None = None

    @property
    def subtask_id(self) -> str:
        return subtask_public_id(
            self.task_id, self.record_idx, self.repeat_index, self.phase, self.judge_round
        )


@dataclass(frozen=True, slots=True)
class JudgeVerdictRow:
    """One judge subtask as scoring reads it: which answer, which round, what it said."""

    row_id: int
    judged_row_id: int  # the answer's subtask row
    record_idx: int
    judge_round: int
    state: SubtaskState
    verdict: float | None  # parsed score (succeeded ones)
    output: str | None  # the judge's full answer (its rationale and verdict line)
    error_reason: str | None  # failed ones: the last error's reason


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """A complete, successful answer kept in the response cache."""

    output: str
    finish_reason: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class CacheEntry:
    """An answer to keep in the response cache under (scope, key)."""

    scope: str  # a tenant, or a model's shared scope
    key: str
    answer: CachedAnswer


@dataclass(frozen=True, slots=True)
class TaskOutput:
    """A succeeded subtask as scoring needs it, and nothing more."""

    row_id: int
    record_idx: int
    repeat_index: int
    record_id: str
    record_json: str  # the stored JSON object; one str shared by a record's repeats in a page
    output: str
    top_logprobs: tuple[tuple[str, float], ...] | None = None  # when asked for
    execution: str | None = None  # a code sample's run in the sandbox (JSON text)


@dataclass(frozen=True, slots=True)
class ExecutionRow:
    """A code sample's run in the sandbox, to store beside its subtask (JSON text)."""

    row_id: int
    execution: str


@dataclass(frozen=True, slots=True)
class SampleScoreRow:
    """Per-sample scores to store beside a subtask for ListSamples."""

    row_id: int
    scores: dict[str, float] | None  # None: a judged answer the scorer did not score
    correct: bool | None
    flags: tuple[str, ...] = ()
    judgement: Json | None = None  # a judged task: the answer's verdict, for ListSamples


@dataclass(frozen=True, slots=True)
class TaskFinish:
    """The scored (or unscorable) end of a task, written in one transaction."""

    task_id: str
    state: TaskState
    result_status: str
    result: Json
    sample_scores: Iterable[SampleScoreRow] = ()  # may be a generator: streamed
    event_payload: Json = field(default_factory=dict)
    time: float = 0.0
    # Drop the task's per-sample scores stored before (``store_sample_scores``, page by
    # page) first: the task ends without a report, so no sample keeps a score.
    clear_scores: bool = False


@dataclass(frozen=True, slots=True)
class FinishReport:
    events: tuple[EventRow, ...]
    run_state: RunState | None  # the run's new terminal state, if this finished it


@dataclass(frozen=True, slots=True)
class ProfileInputs:
    """Everything an ExecutionProfile is computed from, aggregated in SQL."""

    counters: Counters
    requests: int
    retries: int
    rate_limited: int
    prompt_tokens: int
    completion_tokens: int
    call_time_s: float
    # One C double per answer (array('d')): a 1,000,000-subtask task's timings were
    # ~190 MB as fetched rows and tuples of floats, they are 16 MB as columns.
    latencies_s: Sequence[float]
    ttfts_s: Sequence[float]
    started_at: float | None  # the task's first claim
    finished_at: float | None  # the phase's last subtask terminal (answers, or judge calls)
    # (last error reason, count) of the failed_permanent subtasks, most frequent first
    failure_reasons: tuple[tuple[str, int], ...] = ()
    truncated: int = 0  # succeeded with finish_reason "length"
    empty: int = 0  # succeeded with an empty answer
    usage_unknown: int = 0  # succeeded without usage from the provider
    decode_tokens: int = 0  # completion tokens of streamed calls with usage and a TTFT
    decode_time_s: float = 0.0  # their latency − TTFT, summed
    cost: Cost = field(
        default_factory=Cost
    )  # of the successful calls; priced: every one had a price
    cache_hits: int = 0  # succeeded from the response cache (no provider call)

    @classmethod
    def from_sums(
        cls,
        counters: Counters,
        task: "TaskRow",
        *,
        sums: Sequence[Any],
        timings: Iterable[Sequence[Any]],
        answers: Sequence[Any],
        cost: Sequence[Any],
        reasons: Iterable[Sequence[Any]],
    ) -> "ProfileInputs":
        """Built from the rows of the aggregate queries both stores run (the same
        columns in the same order; only their SQL dialects differ). ``timings`` is read
        once, row by row (a cursor: nothing per answer is kept but two doubles)."""
        latencies, ttfts = array("d"), array("d")
        for latency, ttft in timings:
            if latency is not None:
                latencies.append(latency)
            if ttft is not None:
                ttfts.append(ttft)
        return cls(
            counters=counters,
            requests=int(sums[0]),
            retries=int(sums[1]),
            rate_limited=int(sums[2]),
            prompt_tokens=int(sums[3]),
            completion_tokens=int(sums[4]),
            call_time_s=float(sums[5]),
            latencies_s=latencies,
            ttfts_s=ttfts,
            started_at=task.started_at,
            # The phase's own end (its last subtask's terminal write), not the task's:
            # a judged task's answers end before its judge calls do.
            finished_at=task.finished_at if sums[7] is None else float(sums[7]),
            failure_reasons=tuple((str(r[0]), int(r[1])) for r in reasons),
            truncated=int(answers[0]),
            empty=int(answers[1]),
            usage_unknown=int(answers[2]),
            decode_tokens=int(answers[3]),
            decode_time_s=float(answers[4]),
            cost=Cost(
                picousd=int(cost[0]),
                tokens=int(cost[1]),
                estimated=bool(cost[2]),
                priced=int(cost[3]) == 0,
            ),
            cache_hits=int(sums[6]),
        )


class ChangeKind(StrEnum):
    """What another replica changed that this one must act on."""

    EVENTS = "events"  # a run's log grew (detail: its last seq): wake its watchers
    WORK = "work"  # a run has ready work (new, retried or requeued): dispatch it
    CANCEL = "cancel"  # a run was cancelled: abort its calls in flight here (see below)
    FINISHED = "finished"  # a run ended: forget it
    SCORING = "scoring"  # a task's scoring job is free (detail: the task id)
    RESYNC = "resync"  # changes may have been missed (the feed reconnected): look again


# The detail of a CANCEL whose run stopped for a reason (a budget): the calls in flight
# finish and count, as on the replica that cancelled it; a user's cancel aborts them.
CALLS_FINISH = "calls-finish"


@dataclass(frozen=True, slots=True)
class StoreChange:
    """One change made by another process on a shared store (``Store.changes``)."""

    kind: ChangeKind
    run_id: str = ""
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SharedRate:
    """A rate that several replicas share (a model's requests or tokens a minute), as
    one replica states it at a balancing (``Store.capacity_shares``)."""

    limit: float  # the stated rate, per minute
    held: float  # the rate its calls are admitted at now (its share in force), per minute
    demand: float  # the units it wanted since its last balancing, waiting ones included


@dataclass(frozen=True, slots=True)
class Shares:
    """One balancing: this process's share of each shared limit, and what the others
    published (the whole of every limit, and nothing of others, on SQLite)."""

    slots: Mapping[str, int]  # of each concurrency limit
    rates: Mapping[str, float] = field(default_factory=dict)  # of each rate, per minute
    # Each figure this process published (``published``), summed over the other live
    # replicas' latest balancings.
    peers: Mapping[str, float] = field(default_factory=dict)
    replicas: int = 1  # live replicas, this one included
