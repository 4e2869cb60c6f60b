"""Scorers: one versioned scorer per task type, with 95 % intervals, and the pool that
runs them off the event loop.

``score_task`` is the pure entry point; ``ScoringPool.score`` runs it in a worker
process under a time budget and raises ``ScoringFailure`` (SCORER_FAILED or
SCORER_TIMEOUT) for that task only. It takes the samples in memory or as a
``SampleSource`` (pages of ``EncodedSample``s, records as their stored JSON text, sent to
the worker one page at a time), and the report's per-sample scores come back as
``SampleScores`` (columns, read row by row). The scoring rules of each task type are documented
in its module (``_classification``, ``_labels``, ``_mentions``, ``_qa``, ``_normalize``, ``_ner``,
``_entities``, ``_summarization``, ``_generation``, ``_multiple_choice``, ``_choices``,
``_tool_calls``, ``_call_matching``, ``_structured``)
and the intervals in ``_intervals``; the reducers over repeats (pass@k, pass^k,
majority, mean) in ``_reducers``, applied to a report's per-sample correctness
(``_correctness``, the interface a task type plugs into) by ``_reduce_samples``.
"""

from evald_server.scoring._common import BaseScorer, Evaluation
from evald_server.scoring._correctness import (
    CORRECTNESS,
    Correctness,
    SampleCorrectness,
    correctness_of,
)
from evald_server.scoring._errors import ScoringFailure
from evald_server.scoring._intervals import (
    bootstrap_distribution,
    percentile_interval,
    wilson_interval,
)
from evald_server.scoring._isolation import UNSCORABLE_FLAG
from evald_server.scoring._loglikelihood import LOGLIKELIHOOD_MARK, continuation_entries
from evald_server.scoring._pages import (
    EncodedPage,
    EncodedSample,
    PageDecoder,
    SampleSource,
    read_samples,
)
from evald_server.scoring._payloads import (
    ChoiceLetterStats,
    ClassificationPayload,
    ClassMetrics,
    CodePayload,
    CodeVerdictCount,
    EntityTypeMetrics,
    ExtractionRuleCount,
    GenerationPayload,
    MatchModeStats,
    MultipleChoicePayload,
    NerPayload,
    PassAtK,
    QaPayload,
    RougeScore,
    StructuredOutputPayload,
    SubjectAccuracy,
    SummarizationPayload,
    ToolCallPayload,
    WorstExample,
)
from evald_server.scoring._pool import ScoringPool
from evald_server.scoring._reduce_samples import record_samples, reduce_samples
from evald_server.scoring._reducers import (
    RecordSamples,
    ReducedMetric,
    Reducer,
    majority_correct,
    pass_at_k,
    pass_hat_k,
    reduce_records,
)
from evald_server.scoring._registry import Scorer, score_task, scorer_dependencies, scorer_for
from evald_server.scoring._sample_scores import SampleScores
from evald_server.scoring._scored_pages import ScoredPage
from evald_server.scoring._types import (
    IntervalMethod,
    MetricInterval,
    MetricUncertainty,
    Payload,
    RepeatStats,
    SampleScore,
    ScoreReport,
    ScoringSample,
    UnscorableSample,
)

__all__ = [
    "CORRECTNESS",
    "LOGLIKELIHOOD_MARK",
    "UNSCORABLE_FLAG",
    "BaseScorer",
    "ChoiceLetterStats",
    "ClassMetrics",
    "ClassificationPayload",
    "CodePayload",
    "CodeVerdictCount",
    "Correctness",
    "EncodedPage",
    "EncodedSample",
    "EntityTypeMetrics",
    "Evaluation",
    "ExtractionRuleCount",
    "GenerationPayload",
    "IntervalMethod",
    "MatchModeStats",
    "MetricInterval",
    "MetricUncertainty",
    "MultipleChoicePayload",
    "NerPayload",
    "PageDecoder",
    "PassAtK",
    "Payload",
    "QaPayload",
    "RecordSamples",
    "ReducedMetric",
    "Reducer",
    "RepeatStats",
    "RougeScore",
    "SampleCorrectness",
    "SampleScore",
    "SampleScores",
    "SampleSource",
    "ScoreReport",
    "ScoredPage",
    "Scorer",
    "ScoringFailure",
    "ScoringPool",
    "ScoringSample",
    "StructuredOutputPayload",
    "SubjectAccuracy",
    "SummarizationPayload",
    "ToolCallPayload",
    "UnscorableSample",
    "WorstExample",
    "bootstrap_distribution",
    "continuation_entries",
    "correctness_of",
    "majority_correct",
    "pass_at_k",
    "pass_hat_k",
    "percentile_interval",
    "read_samples",
    "record_samples",
    "reduce_records",
    "reduce_samples",
    "score_task",
    "scorer_dependencies",
    "scorer_for",
    "wilson_interval",
]
