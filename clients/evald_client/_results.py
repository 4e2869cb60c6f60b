"""The typed TaskEvaluationResult: a generic shell around one payload per task type."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from evald_client._enums import (
    IntervalMethod,
    JudgeScoreFormat,
    PromptFormat,
    ResultStatus,
    TaskType,
)
from evald_client._models import Cost, EvalError, GenerationParams


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelIdentity:
    """Which model produced a result, with its effective generation parameters."""

    model_id: str
    provider: str
    provider_model: str
    params: GenerationParams


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchmarkRef:
    """The dataset version a result was computed on."""

    name: str
    version: str
    content_sha256: str
    record_count: int
    dataset_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricInterval:
    """A confidence interval of a metric."""

    lower: float
    upper: float
    confidence_level: float
    method: IntervalMethod
    resamples: int
    seed: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ReducedMetric:
    """A reducer over each record's repeats, averaged over records: its name
    (``pass@5``), value, 95 % bootstrap interval over records, the records it is the
    mean over and those left out (fewer than k scored samples)."""

    name: str
    value: float
    interval: MetricInterval
    records: int
    records_skipped: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricUncertainty:
    """A metric's bootstrap and (where a closed form applies) analytic interval."""

    bootstrap: MetricInterval | None
    analytic: MetricInterval | None

    @property
    def preferred(self) -> MetricInterval | None:
        """The bootstrap interval if there is one, else the analytic one."""
        return self.bootstrap or self.analytic


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionProfile:
    """How a task's inference went. Latencies are milliseconds, durations seconds."""

    samples_total: int
    samples_succeeded: int
    samples_failed: int
    samples_cancelled: int
    wall_time_s: float
    latency_mean_ms: float
    latency_p50_ms: float
    latency_p90_ms: float
    latency_p99_ms: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    # None: no successful sample had usage from its provider (unknown, not 0).
    prompt_tokens: int | None
    completion_tokens: int | None
    tokens_per_second: float | None  # task throughput: completion tokens / wall time
    requests: int
    retries: int
    rate_limited: int
    effective_concurrency: float
    scoring_time_s: float
    samples_truncated: int = 0  # answers cut by max_tokens (finish_reason LENGTH)
    samples_empty: int = 0
    samples_without_usage: int = 0  # token counts unknown, left out of the sums
    decode_tokens_per_second: float | None = None  # per call: tokens / (latency − TTFT)
    cost: Cost | None = None  # of the task's successful calls; None from older servers
    cache_hits: int = 0  # answered from the response cache (no provider call)


@dataclass(frozen=True, slots=True, kw_only=True)
class RepeatStats:
    """Consistency across repeats of the same record (runs with repeat > 1)."""

    repeats: int
    records: int
    mean_within_record_stddev: float
    consistent_record_fraction: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Everything needed to reproduce a result."""

    contract_version: str
    evald_version: str
    scorer: str
    prompt_template_sha256: str
    dataset_sha256: str
    python_version: str
    platform: str
    bootstrap_seed: int
    dependencies: Mapping[str, str] = field(default_factory=dict)
    judge: "JudgeProvenance | None" = None  # runs with a judge
    # How the prompts reached the model: CHAT (the server's template) or PLAIN.
    prompt_format: PromptFormat = PromptFormat.UNSPECIFIED
    rescored_from_run_id: str = ""  # a RescoreRun's result: the run whose answers it scored


@dataclass(frozen=True, slots=True, kw_only=True)
class JudgeProvenance:
    """Who graded a task's answers, with which rubric and parameters."""

    model_id: str
    provider: str
    provider_model: str
    params: GenerationParams
    rubric_sha256: str
    score_format: JudgeScoreFormat
    scale_min: int
    scale_max: int
    pass_threshold: float
    rounds: int
    parse_retries: int
    judged_samples: int
    unjudged_samples: int


@dataclass(frozen=True, slots=True, kw_only=True)
class WorstExample:
    """One of the worst-scored samples of a task (text fields possibly truncated)."""

    record_id: str
    repeat_index: int
    input: str
    expected: str
    output: str
    score: float
    note: str
    truncated: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassMetrics:
    """One-vs-rest precision, recall and F1 of one label."""

    label: str
    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfusionMatrix:
    """``rows[i][j]``: samples of gold ``labels[i]`` predicted ``labels[j]``;
    ``unmapped[i]``: those of them whose output matched no label."""

    labels: tuple[str, ...]
    rows: tuple[tuple[int, ...], ...]
    unmapped: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassificationPayload:
    labels: tuple[str, ...]
    confusion_matrix: ConfusionMatrix
    per_class: tuple[ClassMetrics, ...]
    unmapped_outputs: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class QaPayload:
    exact_match: float
    f1: float
    answered: int
    no_answer_outputs: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EntityTypeMetrics:
    entity_type: str
    precision: float
    recall: float
    f1: float
    support: int
    predicted: int


@dataclass(frozen=True, slots=True, kw_only=True)
class NerPayload:
    per_type: tuple[EntityTypeMetrics, ...]
    unparseable_outputs: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RougeScore:
    rouge_type: str
    precision: float
    recall: float
    fmeasure: float


@dataclass(frozen=True, slots=True, kw_only=True)
class SummarizationPayload:
    rouge: tuple[RougeScore, ...]
    stemming: bool
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchModeStats:
    match_mode: str
    samples: int
    correct: int


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerationPayload:
    match_modes: tuple[MatchModeStats, ...]
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChoiceLetterStats:
    """One choice letter: how often it is gold, predicted, and right."""

    letter: str
    gold: int
    predicted: int
    correct: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SubjectAccuracy:
    """Accuracy of the samples of one ``metadata.subject``."""

    subject: str
    samples: int
    correct: int
    accuracy: float


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtractionRuleCount:
    """How many answers one extraction rule (or ``logprobs`` / ``unmapped``) mapped."""

    rule: str
    samples: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MultipleChoicePayload:
    accuracy: float
    unmapped_outputs: int
    letters: tuple[ChoiceLetterStats, ...]
    subjects: tuple[SubjectAccuracy, ...]
    subject_macro_accuracy: float
    extraction_rules: tuple[ExtractionRuleCount, ...]
    logprob_scored: int
    logprob_fallbacks: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PassAtK:
    """pass@k (unbiased estimator) over the problems with at least k scored samples."""

    k: int
    value: float
    problems: int
    problems_left_out: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeVerdictCount:
    """Samples of a code task with one verdict (``passed``, ``failed``, ``error``,
    ``timeout``, ``resource_limit``, ``no_program``)."""

    verdict: str
    samples: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CodePayload:
    pass_at_1: float
    pass_at_k: tuple[PassAtK, ...]  # increasing k, pass@1 first
    verdicts: tuple[CodeVerdictCount, ...]
    problems: int
    extraction_rules: tuple[ExtractionRuleCount, ...]
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallPayload:
    """Tool calls: exact call match, argument accuracy, micro call precision / recall /
    F1, and how many samples went wrong in each way."""

    exact_match: float
    argument_accuracy: float
    call_precision: float
    call_recall: float
    call_f1: float
    no_call: int
    malformed_arguments: int
    wrong_name: int
    extra_calls: int
    wrong_argument_type: int
    calls_made: int
    calls_expected: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class StructuredOutputPayload:
    """Structured outputs: schema validity, JSON validity, field-level exact match and F1
    (over the samples whose record has a reference)."""

    schema_valid_rate: float
    json_valid_rate: float
    field_exact_match: float
    field_f1: float
    invalid_json: int
    schema_violations: int
    with_reference: int
    worst_examples: tuple[WorstExample, ...]


Payload = (
    ClassificationPayload
    | QaPayload
    | NerPayload
    | SummarizationPayload
    | GenerationPayload
    | MultipleChoicePayload
    | CodePayload
    | ToolCallPayload
    | StructuredOutputPayload
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskResult:
    """The result of one task (one model × one dataset version).

    ``metrics`` holds every headline metric flat (``accuracy``, ``f1_macro``…),
    ``intervals`` their 95 % intervals under the same keys; ``payload`` is the
    task-type-specific detail (``None`` when nothing could be scored).
    """

    task_id: str
    run_id: str
    task_type: TaskType
    model: ModelIdentity
    benchmark: BenchmarkRef
    metrics: Mapping[str, float]
    intervals: Mapping[str, MetricUncertainty]
    execution: ExecutionProfile
    repeat_stats: RepeatStats | None
    status: ResultStatus
    errors: tuple[EvalError, ...]
    provenance: Provenance
    created_time: datetime | None
    payload: Payload | None
    judge_execution: ExecutionProfile | None = None  # the judge's calls, counted apart
    # The run's reducers over each record's repeats (``pass@5``, ``majority`` …).
    reduced: tuple[ReducedMetric, ...] = ()
