"""The part every scorer shares: split off unscored samples, intervals, worst examples,
repeat spread, and the assembly of the ``ScoreReport``.

A scorer only says how one task type is evaluated (``Evaluation``); this module turns
that into the report, the same way for every task type.
"""

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from evald_server.domain import TaskType
from evald_server.scoring._intervals import (
    FloatArray,
    Statistic,
    bootstrap_distribution,
    percentile_interval,
    record_units,
    wilson_interval,
)
from evald_server.scoring._payloads import WorstExample
from evald_server.scoring._sample_scores import SampleScores
from evald_server.scoring._types import (
    MetricUncertainty,
    Payload,
    RepeatStats,
    SampleScore,
    ScoreReport,
    ScoringSample,
)

TEXT_LIMIT = 500  # characters of input / expected / output kept in a worst example
_CONSISTENT_TOLERANCE = 1e-12


def truncate(text: str, limit: int = TEXT_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Row:
    """One scored sample as a scorer sees it; ``primary`` orders the worst examples."""

    scores: dict[str, float]
    primary: float
    correct: bool | None = None
    flags: tuple[str, ...] = ()
    note: str = ""


@dataclass(slots=True)
class Evaluation:
    """What a scorer computed for the scored samples (all lists in sample order)."""

    rows: list[Row]
    metrics: dict[str, float]
    statistic: Statistic  # recomputes every headline metric from resample weights
    build_payload: Callable[[tuple[WorstExample, ...]], Payload]
    proportions: dict[str, float] = field(default_factory=dict)  # metric → successes


class BaseScorer(ABC):
    """A versioned scorer for one task type; ``score`` is pure and synchronous."""

    name: ClassVar[str]
    version: ClassVar[str]
    task_type: ClassVar[TaskType]
    primary_metric: ClassVar[str]  # per-sample score used for worst examples and repeats
    # The distributions whose code computes the numbers (recorded in the provenance).
    libraries: ClassVar[tuple[str, ...]] = ("numpy",)

    @property
    def scorer_id(self) -> str:
        return f"{self.name}@{self.version}"

    @abstractmethod
    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        """Score ``scored`` (output not None); ``every`` is the whole task (label sets)."""

    @abstractmethod
    def expected_text(self, record: Mapping[str, Any]) -> str:
        """The gold side of a record as one string, for worst examples."""

    @abstractmethod
    def input_text(self, record: Mapping[str, Any]) -> str:
        """The record's input, for worst examples when no rendered prompt was given."""

    def score(
        self,
        samples: Sequence[ScoringSample],
        *,
        seed: int = 0,
        worst_k: int = 5,
        resamples: int = 1000,
    ) -> ScoreReport:
        if resamples < 1:
            raise ValueError(f"resamples must be at least 1, got {resamples}")
        scored = [s for s in samples if s.output is not None]
        evaluation = self.evaluate(scored, samples)
        units, n_units = record_units([s.record_id for s in scored])
        uncertainty: dict[str, MetricUncertainty] = {}
        if scored:
            distribution = bootstrap_distribution(
                units, n_units, evaluation.statistic, seed=seed, resamples=resamples
            )
            for metric, point in evaluation.metrics.items():
                successes = evaluation.proportions.get(metric)
                uncertainty[metric] = MetricUncertainty(
                    bootstrap=percentile_interval(
                        distribution[metric], point, seed=seed, resamples=resamples
                    ),
                    analytic=None if successes is None else wilson_interval(successes, len(scored)),
                )
        worst = self._worst_examples(scored, evaluation.rows, worst_k)
        return ScoreReport(
            scorer=self.scorer_id,
            metrics=dict(evaluation.metrics) if scored else {},
            uncertainty=uncertainty,
            payload=evaluation.build_payload(worst),
            sample_scores=SampleScores(
                SampleScore(s.subtask_id, row.scores, row.flags, row.correct)
                for s, row in zip(scored, evaluation.rows, strict=True)
            ),
            scored_samples=len(scored),
            skipped_samples=len(samples) - len(scored),
            repeat=repeat_stats(scored, [row.primary for row in evaluation.rows], units, n_units),
        )

    def _worst_examples(
        self, scored: Sequence[ScoringSample], rows: Sequence[Row], k: int
    ) -> tuple[WorstExample, ...]:
        if k <= 0 or not rows:
            return ()
        primary = np.fromiter((row.primary for row in rows), dtype=np.float64, count=len(rows))
        # Stable sort: ties keep sample order, so the choice is deterministic.
        order = np.argsort(primary, kind="stable")[:k]
        examples = []
        for index in order.tolist():
            sample, row = scored[index], rows[index]
            if row.primary >= 1.0:  # a perfect sample is never a "worst" one
                break
            examples.append(
                WorstExample(
                    record_id=sample.record_id,
                    repeat_index=sample.repeat_index,
                    input=truncate(sample.input_text or self.input_text(sample.record)),
                    expected=truncate(self.expected_text(sample.record)),
                    output=truncate(sample.output or ""),
                    score=row.primary,
                    note=row.note or ", ".join(row.flags),
                )
            )
        return tuple(examples)


def repeat_stats(
    scored: Sequence[ScoringSample],
    primary: Sequence[float],
    units: np.ndarray[Any, np.dtype[np.intp]],
    n_units: int,
) -> RepeatStats | None:
    """Spread of the primary score over each record's repeats; None without repeats."""
    if n_units == len(scored):
        return None
    values: FloatArray = np.asarray(primary, dtype=np.float64)
    counts = np.bincount(units, minlength=n_units)
    means = np.bincount(units, weights=values, minlength=n_units) / np.maximum(counts, 1)
    deviations = values - means[units]
    squares = np.bincount(units, weights=deviations * deviations, minlength=n_units)
    spread = np.bincount(units, weights=np.abs(deviations), minlength=n_units)
    measured = counts >= 2
    stddev = np.sqrt(squares[measured] / (counts[measured] - 1))
    return RepeatStats(
        repeats=len({s.repeat_index for s in scored}),
        records=int(measured.sum()),
        mean_within_record_stddev=float(stddev.mean()),
        consistent_record_fraction=float((spread[measured] <= _CONSISTENT_TOLERANCE).mean()),
    )
