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
from evald_server.scoring._correctness import SampleCorrectness, correctness_of, vote_key
from evald_server.scoring._intervals import (
    FloatArray,
    Groups,
    IntArray,
    Statistic,
    bootstrap_distribution,
    percentile_interval,
    record_units,
    wilson_interval,
)
from evald_server.scoring._payloads import WorstExample
from evald_server.scoring._sample_scores import SampleScores
from evald_server.scoring._scored_pages import (
    ConcatenatedScores,
    ScoredPage,
    WorstCandidate,
    merged_order,
    row_ids_of,
    worst_of,
)
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
    # The answer as the scorer compares it (majority vote's key); None: the task type
    # has none (``_correctness.CORRECTNESS``).
    answer: str | None = None


@dataclass(slots=True)
class Evaluation:
    """What a scorer computed for the scored samples (all lists in sample order)."""

    rows: list[Row]
    metrics: dict[str, float]
    statistic: Statistic  # recomputes every headline metric from per-sample weights
    build_payload: Callable[[tuple[WorstExample, ...]], Payload]
    proportions: dict[str, float] = field(default_factory=dict)  # metric → successes
    # The same statistic over weights per group, for the bootstrap (the comparison and
    # any other caller weigh samples: ``statistic``).
    grouped: tuple[Groups, Statistic] | None = None


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

    # Scores page by page as outcomes commit (``score_page`` + ``aggregate``); a scorer
    # that cannot is scored over the whole task once its inference is finished.
    pages: ClassVar[bool] = False
    # Each sample's scores depend on that sample only: a worker scoring the whole task
    # scores each page as it arrives and keeps its columns (``measure`` + ``conclude``,
    # see ``_streamed``) instead of every sample.
    streams: ClassVar[bool] = False

    def compactor(self, worst_k: int) -> Callable[[ScoringSample], ScoringSample] | None:
        """For a whole task that is not ``streams``: each sample reduced to what
        ``score(..., worst_k=worst_k)`` reads of it (a worker keeps these, not the
        records, until the task's end); None: the samples are kept as they came."""
        return None

    def measure_state(self) -> Any:
        """What ``measure`` reuses from one page to the next of a task (a cache)."""
        return None

    def measure(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample], state: Any
    ) -> tuple[list[Row], dict[str, np.ndarray]]:
        """The rows of ``scored`` (the samples of ``every`` with an output) and the
        columns the metrics are computed from: one entry per sample of ``scored`` or of
        ``every`` along axis 0, so that a task's are its pages' concatenated."""
        raise NotImplementedError(f"scorer {self.name} does not score sample by sample")

    def conclude(self, columns: Mapping[str, np.ndarray]) -> Evaluation:
        """The evaluation (without rows) of the samples whose columns ``measure`` gave,
        concatenated in sample order."""
        raise NotImplementedError(f"scorer {self.name} does not score sample by sample")

    def _evaluate_measured(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        """``evaluate`` of a ``streams`` scorer: the same two steps as a streamed task."""
        rows, columns = self.measure(scored, every, self.measure_state())
        evaluation = self.conclude(columns)
        evaluation.rows = rows
        return evaluation

    def score(
        self,
        samples: Sequence[ScoringSample],
        *,
        seed: int = 0,
        worst_k: int = 5,
        resamples: int = 1000,
    ) -> ScoreReport:
        _check_resamples(resamples)
        scored = [s for s in samples if s.output is not None]
        evaluation = self.evaluate(scored, samples)
        units, n_units = record_units([s.record_id for s in scored])
        primary = [row.primary for row in evaluation.rows]
        sample_scores = self._sample_scores(scored, evaluation.rows)
        return self._report(
            evaluation,
            units,
            n_units,
            seed=seed,
            resamples=resamples,
            worst=self._worst_examples(scored, evaluation.rows, worst_k),
            sample_scores=sample_scores,
            scored=len(scored),
            skipped=len(samples) - len(scored),
            repeat=repeat_stats([s.repeat_index for s in scored], primary, units, n_units),
            correctness=self.correctness(units, n_units, [columns_of(sample_scores)]),
        )

    def score_page(
        self, samples: Sequence[ScoringSample], *, context: tuple[str, ...], worst_k: int
    ) -> ScoredPage:
        """Score one page of a task's samples on its own (see ``_scored_pages``). A
        ``streams`` scorer's page is its ``measure``: its samples' scores depend on
        them alone, so a page needs no context."""
        if not (self.pages and self.streams):
            raise NotImplementedError(f"scorer {self.name} does not score page by page")
        scored = [s for s in samples if s.output is not None]
        rows, columns = self.measure(scored, samples, self.measure_state())
        return self._page(samples, scored, rows, context=(), worst_k=worst_k, columns=columns)

    def aggregate(
        self, pages: Sequence[ScoredPage], *, seed: int, worst_k: int, resamples: int
    ) -> ScoreReport | None:
        """The task's report from its scored pages; None when a page was scored against
        a context the task's final one differs from (score the whole task instead).
        A ``streams`` scorer concludes over its pages' columns in row id order, as the
        whole task's stream gives them."""
        if not (self.pages and self.streams):
            raise NotImplementedError(f"scorer {self.name} does not score page by page")
        if not pages:
            return None
        order = merged_order(pages)
        columns: dict[str, np.ndarray] = {}
        for key in pages[0].columns:
            joined = np.concatenate([page.columns[key] for page in pages])
            # A column over the scored samples follows them into row id order; one over
            # every sample of a page (skipped ones too) is read without regard to order.
            per_scored = all(len(page.columns[key]) == page.row_ids.size for page in pages)
            columns[key] = joined[order] if per_scored else joined
        evaluation = self.conclude(columns)
        return self._aggregated(
            pages, evaluation, order, seed=seed, worst_k=worst_k, resamples=resamples
        )

    def _report(
        self,
        evaluation: Evaluation,
        units: IntArray,
        n_units: int,
        *,
        seed: int,
        resamples: int,
        worst: tuple[WorstExample, ...],
        sample_scores: Sequence[SampleScore],
        scored: int,
        skipped: int,
        repeat: RepeatStats | None,
        correctness: SampleCorrectness | None = None,
    ) -> ScoreReport:
        uncertainty: dict[str, MetricUncertainty] = {}
        if scored:
            groups, statistic = evaluation.grouped or (None, evaluation.statistic)
            distribution = bootstrap_distribution(
                units, n_units, statistic, seed=seed, resamples=resamples, groups=groups
            )
            for metric, point in evaluation.metrics.items():
                successes = evaluation.proportions.get(metric)
                uncertainty[metric] = MetricUncertainty(
                    bootstrap=percentile_interval(
                        distribution[metric], point, seed=seed, resamples=resamples
                    ),
                    analytic=None if successes is None else wilson_interval(successes, scored),
                )
        return ScoreReport(
            scorer=self.scorer_id,
            metrics=dict(evaluation.metrics) if scored else {},
            uncertainty=uncertainty,
            payload=evaluation.build_payload(worst),
            sample_scores=sample_scores,
            scored_samples=scored,
            skipped_samples=skipped,
            repeat=repeat,
            correctness=correctness,
        )

    def correctness(
        self,
        units: IntArray,
        n_units: int,
        parts: Sequence[tuple[np.ndarray, Sequence[str | None] | None]],
        order: IntArray | None = None,
    ) -> SampleCorrectness | None:
        """The report's ``SampleCorrectness`` from each part's (correct codes, answer
        keys), concatenated, then taken in ``order`` to follow ``units``; None where
        the task type gives no per-sample correctness."""
        if not correctness_of(self.task_type).correct:
            return None
        codes = np.concatenate([c for c, _ in parts] or [np.empty(0, np.int8)])
        answers: list[str | None] | None = None
        if any(a is not None for _, a in parts):
            answers = [a for c, keys in parts for a in (keys or [None] * len(c))]
        if order is not None:
            codes = codes[order]
            answers = None if answers is None else [answers[i] for i in order.tolist()]
        return SampleCorrectness.from_columns(units, n_units, codes, answers)

    @staticmethod
    def _sample_scores(scored: Sequence[ScoringSample], rows: Sequence[Row]) -> SampleScores:
        return SampleScores(
            SampleScore(s.subtask_id, row.scores, row.flags, row.correct, vote_key(row.answer))
            for s, row in zip(scored, rows, strict=True)
        )

    def _page(
        self,
        samples: Sequence[ScoringSample],
        scored: Sequence[ScoringSample],
        rows: Sequence[Row],
        *,
        context: tuple[str, ...],
        worst_k: int,
        columns: Mapping[str, np.ndarray],
    ) -> ScoredPage:
        """A scored page from the rows of its scored samples (in the page's order)."""
        row_ids = row_ids_of([s.subtask_id for s in scored])
        primary = np.fromiter((row.primary for row in rows), dtype=np.float64, count=len(rows))
        worst = self._worst_candidates(scored, rows, primary, row_ids, worst_k)
        scores = self._sample_scores(scored, rows)
        correct, answers = columns_of(scores)
        return ScoredPage(
            row_ids=row_ids,
            record_ids=tuple(s.record_id for s in scored),
            repeat_indexes=np.fromiter(
                (s.repeat_index for s in scored), dtype=np.intp, count=len(scored)
            ),
            primary=primary,
            sample_scores=scores,
            worst=tuple(worst),
            context=context,
            columns=dict(columns),
            skipped=len(samples) - len(scored),
            correct=correct,
            answers=None if answers is None else tuple(answers),
        )

    def _worst_candidates(
        self,
        scored: Sequence[ScoringSample],
        rows: Sequence[Row],
        primary: FloatArray,
        row_ids: IntArray,
        worst_k: int,
    ) -> list[WorstCandidate]:
        """The page's k worst by (primary, row id): the task's k worst are among them."""
        worst = []
        if worst_k > 0:
            for index in np.lexsort((row_ids, primary))[:worst_k].tolist():
                if primary[index] >= 1.0:
                    break
                example = self._example(scored[index], rows[index])
                worst.append(WorstCandidate(float(primary[index]), int(row_ids[index]), example))
        return worst

    def _aggregated(
        self,
        pages: Sequence[ScoredPage],
        evaluation: Evaluation,
        order: IntArray,
        *,
        seed: int,
        worst_k: int,
        resamples: int,
    ) -> ScoreReport:
        """The report of ``evaluation`` (computed over the samples in ``order``, row id
        order) with what the pages carry: units, worst examples, scores, repeats."""
        record_ids = [rid for page in pages for rid in page.record_ids]
        units, n_units = record_units([record_ids[i] for i in order.tolist()])
        primary = np.concatenate([p.primary for p in pages])[order]
        repeats = np.concatenate([p.repeat_indexes for p in pages])[order]
        return self._report(
            evaluation,
            units,
            n_units,
            seed=seed,
            resamples=resamples,
            worst=worst_of(pages, worst_k),
            sample_scores=ConcatenatedScores([p.sample_scores for p in pages]),
            scored=int(order.size),
            skipped=sum(p.skipped for p in pages),
            repeat=repeat_stats(repeats.tolist(), primary.tolist(), units, n_units),
            correctness=self.correctness(units, n_units, [_correct_of(p) for p in pages], order),
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
            if rows[index].primary >= 1.0:  # a perfect sample is never a "worst" one
                break
            examples.append(self._example(scored[index], rows[index]))
        return tuple(examples)

    def _example(self, sample: ScoringSample, row: Row) -> WorstExample:
        return WorstExample(
            record_id=sample.record_id,
            repeat_index=sample.repeat_index,
            input=truncate(sample.input_text or self.input_text(sample.record)),
            expected=truncate(self.expected_text(sample.record)),
            output=truncate(sample.output or ""),
            score=row.primary,
            note=row.note or ", ".join(row.flags),
        )


def columns_of(scores: SampleScores) -> tuple[np.ndarray, list[str | None] | None]:
    """The correct codes and answer keys of ``scores``, for ``BaseScorer.correctness``."""
    return scores.correct_codes(), scores.answers()


def _correct_of(page: ScoredPage) -> tuple[np.ndarray, Sequence[str | None] | None]:
    if page.correct is None:  # a page built without them: from its scores
        return columns_of(page.sample_scores)
    return page.correct, page.answers


def _check_resamples(resamples: int) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")


def repeat_stats(
    repeat_indexes: Sequence[int],
    primary: Sequence[float],
    units: np.ndarray[Any, np.dtype[np.intp]],
    n_units: int,
) -> RepeatStats | None:
    """Spread of the primary score over each record's repeats; None without repeats."""
    if n_units == len(repeat_indexes):
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
        repeats=len(set(repeat_indexes)),
        records=int(measured.sum()),
        mean_within_record_stddev=float(stddev.mean()),
        consistent_record_fraction=float((spread[measured] <= _CONSISTENT_TOLERANCE).mean()),
    )
