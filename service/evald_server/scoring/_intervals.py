"""95 % intervals for headline metrics.

**Bootstrap (every headline metric).** Percentile bootstrap, 2.5th and 97.5th
percentiles (numpy's default linear interpolation) of the metric recomputed on
``resamples`` resamples drawn with ``numpy.random.default_rng(seed)``. The resampled
unit is the *record*: all repeats of a record move together, so ``repeat = k`` does
not pretend to have k times the data (without repeats this is the ordinary bootstrap
over samples). Resamples are drawn in chunks as multiplicity matrices ``W`` (resample
× sample) and a metric is recomputed from per-sample contributions (``W @ columns``,
or per-class sums for macro averages), never by re-running a scorer, so 100,000
samples × 1,000 resamples take about a second. A percentile interval can miss the
point estimate of a biased statistic (macro-F1 at small n); the interval is then
widened to include it, so ``lower <= point <= upper`` always holds.

A statistic over groups (classification: the (gold, predicted) label pairs) needs only
each resample's count of samples per group. Records that put the same samples in each
group are of one kind, and a resample holds records of each kind in multinomial
(records, each kind's share) numbers, so those counts are drawn directly: resamples ×
kinds draws instead of resamples × records (10,000 samples × 1,000 resamples: ~1 ms
instead of 0.12-0.22 s). The distribution is the bootstrap's; the draws differ from
the per-record ones of the same seed, so an interval differs from theirs by Monte
Carlo noise, as the intervals of two seeds do (the scorer's version says which).

**Analytic (proportions).** Wilson score interval at z = Φ⁻¹(0.975) over all scored
samples (it assumes independent samples; with repeats prefer the bootstrap).
"""

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from evald_server.scoring._types import IntervalMethod, MetricInterval

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]
# Takes W (resamples × samples, how often each sample is drawn) → metric → (resamples,).
Statistic = Callable[[FloatArray], Mapping[str, FloatArray]]

CONFIDENCE = 0.95
_Z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
_PERCENTILES = (100 * (1 - CONFIDENCE) / 2, 100 * (1 + CONFIDENCE) / 2)
_MAX_CELLS = 1 << 22  # bound on a dense indicator's samples × groups (32 MiB of float64)
# Bound on one chunk's resamples × samples: the draws, the weights and the statistic's
# temporaries of a chunk are a scoring worker's peak memory (8 MiB per float64 array;
# 1 << 22 held the worker ~105 MB above its base while scoring 10,000 samples). The
# draws do not depend on the chunking; float sums may differ in the last bit (BLAS
# sums a chunk in its own order), integer counts not at all.
_CHUNK_CELLS = 1 << 20
# Records of more kinds than this (repeats that disagree in many ways) are drawn one by
# one: the multinomial draws cost resamples × kinds binomials.
_MAX_KINDS = 1 << 10


def safe_div(num: FloatArray, den: FloatArray) -> FloatArray:
    """num / den, 0 where den is 0 (the zero_division=0 convention)."""
    out = np.zeros(np.broadcast(num, den).shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den != 0)
    return out


class GroupedSums:
    """Per-group weighted sums, ``out[r, g] = Σ_{i: group[i]=g} W[r, i] · values[i]``.

    Samples whose group is negative are left out. Few groups: one matrix product with
    a dense indicator matrix; many groups: a segmented sum over samples sorted by group.
    """

    def __init__(self, groups: IntArray, n_groups: int, values: FloatArray | None = None) -> None:
        self._n_groups = n_groups
        keep = np.flatnonzero(groups >= 0)
        self._indicator: FloatArray | None = None
        if groups.size * n_groups <= _MAX_CELLS:
            indicator = np.zeros((groups.size, n_groups), dtype=np.float64)
            indicator[keep, groups[keep]] = 1.0 if values is None else values[keep]
            self._indicator = indicator
            return
        order = keep[np.argsort(groups[keep], kind="stable")]
        self._present, self._starts = np.unique(groups[order], return_index=True)
        self._order = order
        self._values = None if values is None else values[order]

    def __call__(self, weights: FloatArray) -> FloatArray:
        if self._indicator is not None:
            return weights @ self._indicator
        out = np.zeros((weights.shape[0], self._n_groups), dtype=np.float64)
        if self._order.size == 0:
            return out
        block = weights[:, self._order]
        if self._values is not None:
            block *= self._values
        out[:, self._present] = np.add.reduceat(block, self._starts, axis=1)
        return out


def record_units(record_ids: list[str]) -> tuple[IntArray, int]:
    """The resampling unit of each sample (its record) and the number of units."""
    if len(set(record_ids)) == len(record_ids):  # no repeats: unit i is sample i
        return np.arange(len(record_ids), dtype=np.intp), len(record_ids)
    index: dict[str, int] = {}
    units = np.fromiter(
        (index.setdefault(rid, len(index)) for rid in record_ids),
        dtype=np.intp,
        count=len(record_ids),
    )
    return units, len(index)


@dataclass(frozen=True, slots=True)
class Groups:
    """Samples a statistic cannot tell apart, in groups (classification: the samples of
    one gold and predicted label pair). A statistic over groups is given each resample's
    draws per group (resamples × groups) instead of per sample: the same sums when its
    per-sample contributions are equal within a group, from a far smaller matrix."""

    of: IntArray  # each sample's group, in 0..count-1
    count: int


def bootstrap_distribution(
    units: IntArray,
    n_units: int,
    statistic: Statistic,
    *,
    seed: int,
    resamples: int,
    groups: Groups | None = None,
) -> dict[str, FloatArray]:
    """The statistic on each of ``resamples`` record-level bootstrap resamples; with
    ``groups``, the statistic takes each resample's counts per group, drawn directly
    (``_RecordKinds``) when the records fall into few kinds."""
    rng = np.random.default_rng(seed)
    kinds = None if groups is None else _RecordKinds.of(units, n_units, groups)
    if kinds is not None:
        return _collect(statistic, resamples, kinds.chunk, lambda rows: kinds.draw(rng, rows))
    n_samples = units.size
    identity = n_units == n_samples  # one sample per record: W over units is W over samples
    per_unit = None if groups is None or identity else _groups_per_unit(units, n_units, groups)

    def draw(rows: int) -> FloatArray:
        draws = rng.integers(0, n_units, size=(rows, n_units))
        if groups is not None and identity:
            # Counts per group straight from the draws: one bincount over small rows.
            codes = groups.of[draws] + (groups.count * np.arange(rows))[:, None]
            counts = np.bincount(codes.ravel(), minlength=rows * groups.count)
            return counts.reshape(rows, groups.count).astype(np.float64)
        weights = np.empty((rows, n_units), dtype=np.float64)
        for row in range(rows):  # row by row: measured faster than one big bincount
            weights[row] = np.bincount(draws[row], minlength=n_units)
        if per_unit is not None:
            return weights @ per_unit  # integer sums: exact
        return weights if identity else weights[:, units]

    return _collect(statistic, resamples, _CHUNK_CELLS // max(1, n_samples), draw)


def _collect(
    statistic: Statistic, resamples: int, chunk: int, draw: Callable[[int], FloatArray]
) -> dict[str, FloatArray]:
    """The statistic on ``resamples`` weight rows drawn ``chunk`` rows at a time."""
    chunk = max(1, min(resamples, chunk))
    parts: dict[str, list[FloatArray]] = {}
    done = 0
    while done < resamples:
        rows = min(chunk, resamples - done)
        for name, values in statistic(draw(rows)).items():
            parts.setdefault(name, []).append(np.asarray(values, dtype=np.float64))
        done += rows
    return {name: np.concatenate(chunks) for name, chunks in parts.items()}


@dataclass(frozen=True, slots=True)
class _RecordKinds:
    """Records that put the same number of samples in each group are of one kind; a
    resample of ``n_units`` records drawn with replacement holds records of each kind
    in multinomial(n_units, each kind's share) numbers, which is the distribution of
    drawing the records one by one and counting, from resamples × kinds draws instead
    of resamples × records."""

    n_units: int
    n_groups: int
    records: FloatArray  # per kind: how many records are of it
    group: IntArray | None  # one sample per record: each kind's group
    samples: FloatArray | None  # else kinds × groups: a record of each kind's samples

    @classmethod
    def of(cls, units: IntArray, n_units: int, groups: Groups) -> "_RecordKinds | None":
        """The records' kinds, or None when there are too many to draw per kind."""
        if n_units == units.size:  # one sample per record: a record's kind is its group
            per_group = np.bincount(groups.of, minlength=groups.count)
            present = np.flatnonzero(per_group)
            if present.size > _MAX_KINDS:
                return None
            records = per_group[present].astype(np.float64)
            return cls(n_units, groups.count, records, present, None)
        per_unit = _groups_per_unit(units, n_units, groups)
        kinds, of_kind = np.unique(per_unit, axis=0, return_counts=True)
        if kinds.shape[0] > _MAX_KINDS or kinds.size > _CHUNK_CELLS:
            return None
        return cls(n_units, groups.count, of_kind.astype(np.float64), None, kinds)

    @property
    def chunk(self) -> int:
        return _CHUNK_CELLS // max(self.records.size, self.n_groups)

    def draw(self, rng: np.random.Generator, rows: int) -> FloatArray:
        """Resamples × groups: each resample's samples per group."""
        counts = rng.multinomial(self.n_units, self.records / self.n_units, size=rows)
        if self.samples is not None:
            return counts.astype(np.float64) @ self.samples  # integer sums: exact
        weights = np.zeros((rows, self.n_groups), dtype=np.float64)
        weights[:, self.group] = counts
        return weights


def _groups_per_unit(units: IntArray, n_units: int, groups: Groups) -> FloatArray:
    """units × groups: how many of each unit's samples are in each group."""
    cells = np.bincount(units * groups.count + groups.of, minlength=n_units * groups.count)
    return cells.reshape(n_units, groups.count).astype(np.float64)


def percentile_interval(
    distribution: FloatArray, point: float, *, seed: int, resamples: int
) -> MetricInterval:
    lower, upper = (float(v) for v in np.percentile(distribution, _PERCENTILES))
    return MetricInterval(
        lower=min(lower, point),
        upper=max(upper, point),
        method=IntervalMethod.BOOTSTRAP_PERCENTILE,
        confidence_level=CONFIDENCE,
        resamples=resamples,
        seed=seed,
    )


def wilson_interval(successes: float, n: int) -> MetricInterval:
    """Wilson score interval for a proportion ``successes / n`` (n > 0)."""
    p = successes / n
    z2 = _Z * _Z
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = _Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    # Clamp rounding noise (at p = 0 or 1 the bound equals p up to an ulp).
    return MetricInterval(
        lower=max(0.0, min(center - half, p)),
        upper=min(1.0, max(center + half, p)),
        method=IntervalMethod.WILSON,
        confidence_level=CONFIDENCE,
    )
