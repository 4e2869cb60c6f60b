"""Compare one task of two runs on the samples they share: every headline metric of the
task type, with a paired bootstrap interval of the delta and a paired test.

**Pairing.** Samples are matched by (record id, repeat index); only samples that
succeeded in both runs are paired. A record with a scored sample in one run only is
reported and left out. The *unit* of resampling and of swapping is the record: all
repeats of a record move together.

**One scorer, both runs.** The task type's own scorer evaluates the baseline's and the
candidate's paired samples as one list (baseline copies first); its resampling
``statistic`` then gives any metric on any weighting of that list. So every headline
metric — a mean (accuracy, exact match, ROUGE), a ratio of sums (micro F1), a macro
average (macro F1) — is compared with exactly the definition the results use:

* values: weight 1 on one run's copies, 0 on the other's;
* bootstrap: the same record resample ``W`` for both runs (``[W, 0]`` vs ``[0, W]``),
  percentiles 2.5 / 97.5 of the delta, widened to contain the observed delta,
  ``numpy.random.default_rng(seed)``;
* permutation: a record's baseline and candidate copies swapped at random
  (``[1 - S, S]`` vs ``[S, 1 - S]``), ``numpy.random.default_rng([seed, 1])``;
  see ``_tests`` for the p-value and for McNemar, used instead for proportions with
  one sample per record.

*Improved / worsened / unchanged* count records whose per-sample score (the metric's
own when the scorer keeps one per sample, else the task's primary score) averaged over
the record's repeats went up, down, or stayed within 1e-12.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from evald_server.comparison._tests import (
    FloatArray,
    PairedTest,
    exhaustive,
    mcnemar_exact,
    permutation_p_value,
    sign_flips,
)
from evald_server.comparison._types import DeltaInterval, MetricComparison, PairedSamples
from evald_server.domain import TaskType
from evald_server.scoring import BaseScorer, Evaluation, ScoringSample, scorer_for

CONFIDENCE = 0.95
UNPAIRED_IDS_SHOWN = 100
DEFAULT_RESAMPLES = 1000
DEFAULT_PERMUTATIONS = 10_000
_MAX_CELLS = 1 << 22  # weights per chunk (rows × samples), 32 MiB of float64
_TIE = 1e-12
_PERCENTILES = (100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2)


@dataclass(frozen=True, slots=True)
class _Pairs:
    baseline: list[ScoringSample]
    candidate: list[ScoringSample]
    units: NDArray[np.intp]  # record index of each pair
    n_units: int
    summary: PairedSamples


def pair_samples(baseline: Sequence[ScoringSample], candidate: Sequence[ScoringSample]) -> _Pairs:
    """Match scored samples by (record id, repeat index), in the baseline's order."""
    base = {(s.record_id, s.repeat_index): s for s in baseline if s.output is not None}
    cand = {(s.record_id, s.repeat_index): s for s in candidate if s.output is not None}
    keys = [key for key in base if key in cand]
    index: dict[str, int] = {}
    units = np.fromiter(
        (index.setdefault(record, len(index)) for record, _ in keys), dtype=np.intp, count=len(keys)
    )
    base_records = dict.fromkeys(record for record, _ in base)
    cand_records = dict.fromkeys(record for record, _ in cand)
    base_only = [r for r in base_records if r not in cand_records]
    cand_only = [r for r in cand_records if r not in base_records]
    summary = PairedSamples(
        samples=len(keys),
        records=len(index),
        baseline_only_records=len(base_only),
        candidate_only_records=len(cand_only),
        baseline_only_record_ids=tuple(base_only[:UNPAIRED_IDS_SHOWN]),
        candidate_only_record_ids=tuple(cand_only[:UNPAIRED_IDS_SHOWN]),
    )
    return _Pairs([base[k] for k in keys], [cand[k] for k in keys], units, len(index), summary)


def _deltas(
    evaluation: Evaluation, base_weights: FloatArray, cand_weights: FloatArray
) -> dict[str, FloatArray]:
    """metric → candidate − baseline for each row of the two weight matrices."""
    both = evaluation.statistic(np.vstack([base_weights, cand_weights]))
    rows = base_weights.shape[0]
    return {m: np.asarray(v[rows:] - v[:rows], dtype=np.float64) for m, v in both.items()}


def _collect(parts: list[dict[str, FloatArray]]) -> dict[str, FloatArray]:
    return {m: np.concatenate([p[m] for p in parts]) for m in parts[0]}


class _Weighing:
    """Weight matrices over the combined list (baseline copies, then candidate copies)."""

    def __init__(self, pairs: _Pairs) -> None:
        self.units = pairs.units
        self.n_units = pairs.n_units
        self.n = pairs.units.size
        # Two runs' copies and baseline + candidate rows at once: 4n cells per row.
        self.chunk_rows = max(1, _MAX_CELLS // max(1, 4 * self.n))

    def per_sample(self, unit_weights: FloatArray) -> FloatArray:
        return unit_weights if self.n_units == self.n else unit_weights[:, self.units]

    def bootstrap(
        self, evaluation: Evaluation, *, seed: int, resamples: int
    ) -> dict[str, FloatArray]:
        rng = np.random.default_rng(seed)
        parts = []
        for start in range(0, resamples, self.chunk_rows):
            rows = min(self.chunk_rows, resamples - start)
            draws = rng.integers(0, self.n_units, size=(rows, self.n_units))
            counts = np.empty((rows, self.n_units), dtype=np.float64)
            for row in range(rows):
                counts[row] = np.bincount(draws[row], minlength=self.n_units)
            weights = self.per_sample(counts)
            zeros = np.zeros_like(weights)
            parts.append(
                _deltas(evaluation, np.hstack([weights, zeros]), np.hstack([zeros, weights]))
            )
        return _collect(parts)

    def permutations(
        self, evaluation: Evaluation, *, seed: int, permutations: int
    ) -> dict[str, FloatArray]:
        rng = np.random.default_rng([seed, 1])
        parts = []
        for masks in sign_flips(self.n_units, permutations, rng, chunk_rows=self.chunk_rows):
            swap = self.per_sample(masks)
            keep = 1.0 - swap
            parts.append(_deltas(evaluation, np.hstack([keep, swap]), np.hstack([swap, keep])))
        return _collect(parts)


def _sample_values(evaluation: Evaluation, metric: str, primary: str) -> tuple[FloatArray, str]:
    """The per-sample score standing for ``metric`` (and its name) on every combined row."""
    first = evaluation.rows[0].scores
    key = metric if metric in first else "correct" if metric == "accuracy" else None
    if key is not None and key in first:
        values = [row.scores[key] for row in evaluation.rows]
        return np.asarray(values, dtype=np.float64), key
    return np.asarray([row.primary for row in evaluation.rows], dtype=np.float64), primary


def _record_means(values: FloatArray, units: NDArray[np.intp], n_units: int) -> FloatArray:
    counts = np.bincount(units, minlength=n_units)
    sums = np.bincount(units, weights=values, minlength=n_units).astype(np.float64)
    return sums / np.maximum(counts, 1)


def _interval(
    distribution: FloatArray, delta: float, *, seed: int, resamples: int
) -> DeltaInterval:
    lower, upper = (float(v) for v in np.percentile(distribution, _PERCENTILES))
    return DeltaInterval(
        lower=min(lower, delta),
        upper=max(upper, delta),
        confidence_level=CONFIDENCE,
        resamples=resamples,
        seed=seed,
    )


def _scorer(task_type: TaskType) -> BaseScorer:
    scorer = scorer_for(task_type)
    if not isinstance(scorer, BaseScorer):  # every registered scorer is one
        raise TypeError(f"the {task_type.value} scorer cannot be evaluated on weights")
    return scorer


def compare_samples(
    task_type: TaskType,
    baseline: Sequence[ScoringSample],
    candidate: Sequence[ScoringSample],
    *,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    permutations: int = DEFAULT_PERMUTATIONS,
) -> tuple[PairedSamples, tuple[MetricComparison, ...]]:
    """Pair the samples and compare every headline metric (none when nothing pairs)."""
    if resamples < 1 or permutations < 1:
        raise ValueError("resamples and permutations must be at least 1")
    pairs = pair_samples(baseline, candidate)
    if pairs.summary.samples == 0:
        return pairs.summary, ()
    scorer = _scorer(task_type)
    combined = pairs.baseline + pairs.candidate
    evaluation = scorer.evaluate(combined, combined)
    weighing = _Weighing(pairs)
    ones = np.ones((1, weighing.n))
    zeros = np.zeros((1, weighing.n))
    points = evaluation.statistic(np.vstack([np.hstack([ones, zeros]), np.hstack([zeros, ones])]))
    booted = weighing.bootstrap(evaluation, seed=seed, resamples=resamples)
    null = weighing.permutations(evaluation, seed=seed, permutations=permutations)
    exact = exhaustive(weighing.n_units, permutations)
    one_per_record = weighing.n_units == weighing.n
    comparisons = []
    for metric in evaluation.metrics:
        base_value, cand_value = (float(v) for v in np.asarray(points[metric]))
        delta = cand_value - base_value
        values, record_score = _sample_values(evaluation, metric, scorer.primary_metric)
        base_values, cand_values = values[: weighing.n], values[weighing.n :]
        binary = bool(np.isin(values, (0.0, 1.0)).all())
        if metric in evaluation.proportions and one_per_record and binary:
            b = int(np.count_nonzero((base_values == 1.0) & (cand_values == 0.0)))
            c = int(np.count_nonzero((base_values == 0.0) & (cand_values == 1.0)))
            p_value, test = mcnemar_exact(b, c), PairedTest.MCNEMAR_EXACT
        else:
            p_value = permutation_p_value(null[metric], delta, exact=exact)
            test = PairedTest.PERMUTATION
        change = _record_means(cand_values, pairs.units, pairs.n_units) - _record_means(
            base_values, pairs.units, pairs.n_units
        )
        comparisons.append(
            MetricComparison(
                metric=metric,
                baseline=base_value,
                candidate=cand_value,
                delta=delta,
                interval=_interval(booted[metric], delta, seed=seed, resamples=resamples),
                p_value=p_value,
                test=test,
                records_improved=int(np.count_nonzero(change > _TIE)),
                records_worsened=int(np.count_nonzero(change < -_TIE)),
                records_unchanged=int(np.count_nonzero(np.abs(change) <= _TIE)),
                record_score=record_score,
            )
        )
    return pairs.summary, tuple(comparisons)
