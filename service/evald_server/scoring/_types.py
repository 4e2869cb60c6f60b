"""What a scorer takes and what it returns: plain frozen dataclasses, picklable.

A ``ScoreReport`` crosses a process boundary (the scoring pool) and is then mapped to
``evald.v1.TaskEvaluationResult`` by the API layer; the payload classes map 1:1 to
the proto payload messages.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from evald_server.scoring._correctness import SampleCorrectness
from evald_server.scoring._payloads import (
    ClassificationPayload,
    CodePayload,
    GenerationPayload,
    MultipleChoicePayload,
    NerPayload,
    QaPayload,
    StructuredOutputPayload,
    SummarizationPayload,
    ToolCallPayload,
)

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


@dataclass(frozen=True, slots=True)
class ScoringSample:
    """One subtask of a task: a record, one repeat of it, and what the model answered."""

    subtask_id: str
    record_id: str
    repeat_index: int
    record: Mapping[str, Any]  # the validated dataset record
    output: str | None  # None when the subtask did not succeed: not scored
    input_text: str = ""  # the rendered prompt, shown in worst examples
    # The first generated token's top alternatives (token, log-probability) when the
    # run asked for log-probability scoring (empty: asked, none came back); else None.
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    # A code task's sample: its program's run in the sandbox (the stored JSON object).
    execution: Mapping[str, Any] | None = None

    def __reduce__(self) -> tuple[type["ScoringSample"], tuple[Any, ...]]:
        # Pages of these cross to the scoring workers as they commit: pickled as the
        # constructor's arguments, 2,000 take ~6 ms instead of ~66 ms (the frozen slots
        # dataclass's own __getstate__ looks up its fields for every sample).
        return (
            ScoringSample,
            (
                self.subtask_id,
                self.record_id,
                self.repeat_index,
                self.record,
                self.output,
                self.input_text,
                self.top_logprobs,
                self.execution,
            ),
        )


class IntervalMethod(StrEnum):
    """How an interval was computed (recorded in the result next to the numbers)."""

    BOOTSTRAP_PERCENTILE = "bootstrap_percentile"
    WILSON = "wilson"


@dataclass(frozen=True, slots=True)
class MetricInterval:
    lower: float
    upper: float
    method: IntervalMethod
    confidence_level: float = 0.95
    resamples: int = 0  # bootstrap only
    seed: int = 0  # bootstrap only


@dataclass(frozen=True, slots=True)
class MetricUncertainty:
    bootstrap: MetricInterval
    analytic: MetricInterval | None = None  # where a closed form exists (Wilson)


@dataclass(frozen=True, slots=True)
class SampleScore:
    """One scored sample, as ListSamples shows it."""

    subtask_id: str
    scores: dict[str, float]
    flags: tuple[str, ...] = ()
    correct: bool | None = None  # None where "correct" has no meaning (ROUGE)
    # The answer normalised as the scorer compares it, for majority vote (not stored).
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class RepeatStats:
    """Spread of the primary per-sample score across the repeats of each record."""

    repeats: int  # distinct repeat indices among scored samples
    records: int  # records with at least two scored repeats (the ones measured)
    mean_within_record_stddev: float  # sample standard deviation (ddof=1), averaged
    consistent_record_fraction: float  # records whose repeats all scored the same


@dataclass(frozen=True, slots=True)
class UnscorableSample:
    """A sample its scorer raised on, alone (``_isolation``); ``error`` is the
    exception's type and message, cut."""

    subtask_id: str
    record_id: str
    error: str


@dataclass(frozen=True, slots=True)
class ScoreReport:
    scorer: str  # "name@version", recorded in provenance
    metrics: dict[str, float]  # headline metrics, fractions in [0, 1]
    uncertainty: dict[str, MetricUncertainty]  # one per headline metric
    payload: Payload
    # Every scored sample; a scorer returns them as ``SampleScores`` (columns).
    sample_scores: Sequence[SampleScore]
    scored_samples: int
    skipped_samples: int  # output None
    repeat: RepeatStats | None = None
    # Samples left out because the scorer raised on them alone (not in the metrics).
    unscorable: tuple[UnscorableSample, ...] = ()
    # Each scored sample's record, correct bool and answer key, for the reducers over
    # repeats (``_correctness``); None from a scorer without per-sample correctness.
    # Never stored: a result read back has None.
    correctness: SampleCorrectness | None = None
