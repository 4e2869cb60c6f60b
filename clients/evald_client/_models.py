"""The typed objects of datasets, models, runs and samples (converted in ``_convert_runs``).

All are frozen: they are snapshots of what the server said. ``GenerationParams``,
``RetryPolicy`` and ``DatasetRef`` are also built by callers, for ``create_run``.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from evald_client._enums import (
    ChoiceContinuation,
    ChoiceScoring,
    ErrorCategory,
    FinishReason,
    JudgeScoreFormat,
    PromptFormat,
    ReducerKind,
    ResultStatus,
    RunState,
    ShotFormat,
    SubtaskState,
    TaskState,
    TaskType,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationParams:
    """Sampling parameters; ``None`` (or an empty ``stop``) means "keep the default"."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()


_REDUCER_SPELLING = {
    ReducerKind.PASS_AT_K: "pass@",
    ReducerKind.PASS_HAT_K: "pass^",
    ReducerKind.MAJORITY: "majority",
    ReducerKind.MEAN: "mean",
}


@dataclass(frozen=True, slots=True)
class Reducer:
    """A reducer over each record's repeats: ``Reducer.parse("pass@5")``, ``"pass^3"``,
    ``"majority"`` or ``"mean"``; ``k`` (pass@k, pass^k) is at most the run's repeat."""

    kind: ReducerKind
    k: int | None = None

    @property
    def name(self) -> str:
        """As the result names it: ``pass@5``, ``pass^3``, ``majority``, ``mean``."""
        spelling = _REDUCER_SPELLING.get(self.kind, self.kind.value)
        return spelling + ("" if self.k is None else str(self.k))

    @classmethod
    def parse(cls, text: str) -> "Reducer":
        """``pass@K``, ``pass^K``, ``majority`` or ``mean``; ``ValueError`` otherwise."""
        text = text.strip()
        for kind in (ReducerKind.PASS_AT_K, ReducerKind.PASS_HAT_K):
            prefix = _REDUCER_SPELLING[kind]
            if text.startswith(prefix):
                digits = text[len(prefix) :]
                if not digits.isdigit():
                    raise ValueError(f"reducer {text!r}: {prefix}K needs a whole number K")
                return cls(kind, int(digits))
        for kind in (ReducerKind.MAJORITY, ReducerKind.MEAN):
            if text == kind.value:
                return cls(kind)
        raise ValueError(f"unknown reducer {text!r} (pass@K, pass^K, majority, mean)")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How the engine retries transient provider failures; ``None`` means the server's
    default. ``backoff_s`` are the delays before retry 1, 2, …; the last one repeats."""

    max_retries: int | None = None
    backoff_s: tuple[float, ...] = ()
    jitter_fraction: float | None = None
    retry_after_cap_s: float | None = None
    # Budgets of their own per error class; unset classes share ``max_retries``.
    max_rate_limited_retries: int | None = None
    max_timeout_retries: int | None = None
    max_transient_retries: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """What a run may spend; reached, the run stops dispatching and ends CANCELLED
    (``Run.cancel_reason`` says why). The calls in flight then still finish and count."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """What successful calls cost. ``priced`` false: no price is configured (``cost_usd``
    is then 0, not free); ``estimated``: some token counts were estimated from the text."""

    cost_usd: float = 0.0
    tokens: int = 0
    estimated: bool = False
    priced: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryCounts:
    """A subtask's failed attempts by retry class since it was last queued."""

    rate_limited: int = 0
    timeout: int = 0
    transient: int = 0


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """One dataset version, by name and version label."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptOptions:
    """How records become chat messages: a system message, then ``shots`` solved
    examples (drawn with ``shot_seed`` from the dataset itself, never the record asked,
    or from ``shots_from``), laid out as ``shot_format``."""

    system_message: str | None = None
    shots: int = 0
    shots_from: DatasetRef | None = None
    shot_seed: int = 0
    shot_format: ShotFormat = ShotFormat.SINGLE_MESSAGE


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetOptions:
    """Settings of one dataset of a run; they win over the run's and the models'."""

    dataset: DatasetRef
    generation: GenerationParams | None = None
    prompt: PromptOptions | None = None
    choice_scoring: ChoiceScoring | None = None
    choice_continuation: ChoiceContinuation | None = None  # loglikelihood: letters or texts
    prompt_format: PromptFormat | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """An immutable, versioned dataset stored on the server."""

    dataset_id: str
    name: str
    version: str
    task_type: TaskType
    record_count: int
    content_sha256: str
    prompt_template: str
    created_time: datetime | None
    size_bytes: int
    prompt: PromptOptions | None = None

    @property
    def ref(self) -> DatasetRef:
        return DatasetRef(self.name, self.version)


@dataclass(frozen=True, slots=True, kw_only=True)
class Model:
    """A model of the server's registry (never with secrets)."""

    model_id: str
    provider: str
    provider_model: str
    max_concurrency: int
    timeout_s: float | None
    default_params: GenerationParams
    streaming: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalError:
    """A failure recorded as data: per sample or per task. ``reason`` is the contract's
    ErrorReason name, e.g. ``"PROVIDER_TIMEOUT"``."""

    category: ErrorCategory
    reason: str
    message: str
    retryable: bool
    http_equivalent: int
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubtaskCounts:
    """Subtask counts by state; ``total`` is their sum. ``running``: a provider call is in
    flight; ``queued``: claimed by the engine, waiting for a slot of a limit."""

    total: int = 0
    pending: int = 0
    queued: int = 0
    running: int = 0
    retrying: int = 0
    succeeded: int = 0
    failed_permanent: int = 0
    cancelled: int = 0

    @property
    def finished(self) -> int:
        """Subtasks in a terminal state."""
        return self.succeeded + self.failed_permanent + self.cancelled

    @property
    def success_rate(self) -> float | None:
        """Succeeded over succeeded + failed for good; ``None`` before either happened."""
        done = self.succeeded + self.failed_permanent
        return self.succeeded / done if done else None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskProgress:
    """The progress of one task (one model × one dataset version)."""

    task_id: str
    model_id: str
    dataset: DatasetRef
    task_type: TaskType
    state: TaskState
    counts: SubtaskCounts
    result_status: ResultStatus


@dataclass(frozen=True, slots=True, kw_only=True)
class RunProgress:
    """Run-wide counts and one row per task, models outer, datasets inner."""

    counts: SubtaskCounts = SubtaskCounts()
    tasks: tuple[TaskProgress, ...] = ()
    cost: Cost | None = None  # of the run's successful calls; None from older servers


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeOptions:
    """Grade every answer of a run with a judge model from the registry.

    ``rubric`` is a template over ``{input}``, ``{reference}`` and ``{output}`` (empty:
    the server's default rubric); ``rounds`` > 1 judges each answer repeatedly and
    reports ``judge_agreement_rate``."""

    model_id: str
    rubric: str = ""
    score_format: JudgeScoreFormat | str = JudgeScoreFormat.PASS_FAIL
    scale_min: int = 0  # both 0: the server's 1-5
    scale_max: int = 0
    pass_threshold: int | None = None
    rounds: int = 1
    parse_retries: int | None = None  # None: the server's default (2)
    generation: GenerationParams | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSpec:
    """What a run evaluates, as the server accepted it."""

    name: str
    model_ids: tuple[str, ...]
    datasets: tuple[DatasetRef, ...]
    max_concurrency: int | None
    repeat: int
    retry_policy: RetryPolicy
    generation: GenerationParams
    labels: Mapping[str, str] = field(default_factory=dict)
    dataset_options: tuple[DatasetOptions, ...] = ()
    prompt: PromptOptions | None = None
    choice_scoring: ChoiceScoring | None = None
    budget: Budget | None = None
    judge: JudgeOptions | None = None
    response_cache: bool = False
    reducers: tuple[Reducer, ...] = ()
    prompt_format: PromptFormat | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """A submitted run: spec, state, progress. ``last_seq`` is where a watch that should
    see only later events starts."""

    run_id: str
    spec: RunSpec
    state: RunState
    progress: RunProgress
    created_time: datetime | None
    started_time: datetime | None
    finished_time: datetime | None
    last_seq: int
    request_id: str
    cancel_requested: bool = False
    cancel_reason: str = ""  # why the server cancelled it (its budget was reached)
    rescored_from_run_id: str = ""  # a RescoreRun: the run whose answers it scores again

    @property
    def is_terminal(self) -> bool:
        return self.state.is_terminal


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryOutcome:
    """The answer of ``retry_run``: the run after the retry, and how many subtasks were
    re-queued."""

    run: Run
    requeued: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeTestOutcome:
    """One test of a code sample: ``passed``, ``failed``, ``error``,
    ``resource_limit`` or ``not_run``."""

    index: int
    status: str
    error_type: str = ""
    detail: str = ""  # the last lines of its traceback


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeExecution:
    """How a code sample's program fared in the server's sandbox.

    ``verdict``: ``passed``, ``failed``, ``error``, ``timeout``, ``resource_limit`` or
    ``no_program``; it comes from the process's exit status and the harness's
    authenticated records, never from what the program printed."""

    verdict: str
    reason: str
    error_type: str = ""
    traceback: str = ""
    resource: str = ""
    tests: tuple[CodeTestOutcome, ...] = ()
    extraction_rule: str = ""
    duration_ms: float = 0.0
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"


@dataclass(frozen=True, slots=True, kw_only=True)
class SampleJudgement:
    """The judge's verdict on one answer (``score``/``passed`` None: no verdict)."""

    score: float | None
    passed: bool | None
    rationale: str
    rounds: int
    agreed: bool | None  # None with fewer than two verdicts
    error: EvalError | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One subtask as a row: what was sent, what came back, how it scored."""

    subtask_id: str
    task_id: str
    model_id: str
    record_id: str
    repeat_index: int
    state: SubtaskState
    input: str
    expected: str
    output: str
    scores: Mapping[str, float]
    flags: tuple[str, ...]
    attempts: int
    latency_ms: float | None
    ttft_ms: float | None
    prompt_tokens: int | None  # None: the provider reported no usage (unknown, not 0)
    completion_tokens: int | None
    first_error: EvalError | None
    last_error: EvalError | None
    finished_time: datetime | None
    finish_reason: FinishReason = FinishReason.UNSPECIFIED
    decode_tokens_per_second: float | None = None  # completion tokens / (latency − TTFT)
    # Fields ListSamples cut to fit its page: name → full size in bytes.
    truncated_fields: Mapping[str, int] = field(default_factory=dict)
    cost: Cost | None = None  # of the successful call; None before it
    failed_attempts: RetryCounts = field(default_factory=RetryCounts)
    judgement: SampleJudgement | None = None  # runs with a judge, once scored
    cache_hit: bool = False  # answered from the response cache, no provider call
    execution: CodeExecution | None = None  # a code sample's run in the sandbox

    @property
    def judge_round(self) -> int | None:
        """A judge call's round (its id is its answer's with ``.j<round>``: listings
        filtered by state show judge calls too); None for an answer."""
        _, dot_j, suffix = self.subtask_id.rpartition(".j")
        return int(suffix) if dot_j and suffix.isdigit() else None
