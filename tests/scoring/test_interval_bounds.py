"""The raw percentile bounds against an independent bootstrap, and the Wilson values.

``_check_intervals`` cannot fail for bootstrap bounds (the code widens an interval to
contain its estimate), so these tests redo the bootstrap by hand — resample indices
with the same generator, recompute accuracy by indexing, take numpy's percentiles —
and compare the reported bounds with it, where the widening does not apply.
"""

import math
import random

import numpy as np
import pytest

from evald_server.domain import TaskType
from evald_server.scoring import IntervalMethod, score_task
from evald_server.scoring._intervals import (
    GroupedSums,
    bootstrap_distribution,
    percentile_interval,
    record_units,
    wilson_interval,
)
from tests.scoring._factories import make_sample, samples_of

RESAMPLES = 1000


def _accuracy_samples(n: int, p: float, seed: int) -> tuple[list[object], np.ndarray]:
    rng = random.Random(seed)
    correct = np.array([rng.random() < p for _ in range(n)], dtype=np.float64)
    pairs = [({"input": "q", "reference": "yes"}, "yes" if c else "no") for c in correct]
    return list(samples_of(pairs)), correct


def _independent(values: np.ndarray, seed: int) -> tuple[float, float]:
    """Percentile bootstrap of the mean, one sample per record, by indexing."""
    draws = np.random.default_rng(seed).integers(0, values.size, size=(RESAMPLES, values.size))
    means = values[draws].mean(axis=1)
    lower, upper = np.percentile(means, (2.5, 97.5))
    return float(lower), float(upper)


@pytest.mark.parametrize(("n", "p", "seed"), [(40, 0.6, 1), (200, 0.3, 7), (1000, 0.85, 3)])
def test_bootstrap_bounds_match_an_independent_bootstrap(n: int, p: float, seed: int) -> None:
    samples, correct = _accuracy_samples(n, p, seed)
    report = score_task(TaskType.GENERATION, samples, seed=seed)  # type: ignore[arg-type]
    interval = report.uncertainty["accuracy"].bootstrap
    lower, upper = _independent(correct, seed)
    assert lower < correct.mean() < upper  # no widening here: the raw bounds are reported
    assert interval.lower == pytest.approx(lower, abs=1e-12)
    assert interval.upper == pytest.approx(upper, abs=1e-12)
    assert interval.method is IntervalMethod.BOOTSTRAP_PERCENTILE
    assert (interval.resamples, interval.seed, interval.confidence_level) == (RESAMPLES, seed, 0.95)


def test_repeats_resample_whole_records() -> None:
    # 30 records × 3 repeats; a record's repeats move together.
    rng = random.Random(5)
    samples = []
    per_record = []
    for r in range(30):
        hits = [rng.random() < 0.5 for _ in range(3)]
        per_record.append(sum(hits))
        for k, hit in enumerate(hits):
            record = {"input": "q", "reference": "yes"}
            samples.append(
                make_sample(record, "yes" if hit else "no", index=r, record_id=f"r{r}", repeat=k)
            )
    report = score_task(TaskType.GENERATION, samples, seed=9)
    interval = report.uncertainty["accuracy"].bootstrap
    hits = np.array(per_record, dtype=np.float64)
    draws = np.random.default_rng(9).integers(0, 30, size=(RESAMPLES, 30))
    means = hits[draws].sum(axis=1) / (3 * 30)
    lower, upper = np.percentile(means, (2.5, 97.5))
    assert interval.lower == pytest.approx(lower, abs=1e-12)
    assert interval.upper == pytest.approx(upper, abs=1e-12)


def test_an_interval_that_misses_its_estimate_is_widened_to_it() -> None:
    distribution = np.linspace(0.2, 0.4, 101)
    below = percentile_interval(distribution, 0.1, seed=0, resamples=101)
    assert (below.lower, below.upper) == (0.1, pytest.approx(0.395))
    above = percentile_interval(distribution, 0.9, seed=0, resamples=101)
    assert (above.lower, above.upper) == (pytest.approx(0.205), 0.9)
    inside = percentile_interval(distribution, 0.3, seed=0, resamples=101)
    assert (inside.lower, inside.upper) == (pytest.approx(0.205), pytest.approx(0.395))


@pytest.mark.parametrize(
    ("successes", "n", "lower", "upper"),
    [
        # Reference values of the Wilson score interval at z = 1.959964.
        (50, 100, 0.403832, 0.596168),
        (0, 10, 0.0, 0.277533),
        (10, 10, 0.722467, 1.0),
    ],
)
def test_wilson_reference_values(successes: int, n: int, lower: float, upper: float) -> None:
    interval = wilson_interval(successes, n)
    assert interval.lower == pytest.approx(lower, abs=1e-6)
    assert interval.upper == pytest.approx(upper, abs=1e-6)
    assert interval.method is IntervalMethod.WILSON
    assert interval.confidence_level == 0.95


def test_wilson_by_its_formula() -> None:
    z = 1.959963984540054
    for successes, n in ((3, 7), (17, 40), (399, 1000)):
        p = successes / n
        center = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        interval = wilson_interval(successes, n)
        assert interval.lower == pytest.approx(center - half, rel=1e-12)
        assert interval.upper == pytest.approx(center + half, rel=1e-12)


def test_wilson_bounds_stay_within_zero_and_one_despite_rounding() -> None:
    # At p = 1 (or 0) the raw bound overshoots 1 (or 0) by an ulp for many n.
    for n in range(1, 200):
        assert wilson_interval(n, n).upper == 1.0
        assert wilson_interval(0, n).lower == 0.0
        assert wilson_interval(n, n).lower <= 1.0
        assert wilson_interval(0, n).upper >= 0.0


def test_a_large_task_draws_exactly_the_requested_resamples_in_chunks() -> None:
    # 5,000 samples: the draws come in several chunks (the cell bound), the last smaller.
    units, n_units = record_units([f"r{i}" for i in range(5000)])
    values = np.arange(5000, dtype=np.float64) % 2

    def mean(weights: np.ndarray) -> dict[str, np.ndarray]:
        return {"m": weights @ values / 5000}

    distribution = bootstrap_distribution(units, n_units, mean, seed=1, resamples=RESAMPLES)
    assert distribution["m"].shape == (RESAMPLES,)
    assert 0.45 < float(np.median(distribution["m"])) < 0.55


def test_grouped_sums_agree_on_the_dense_and_the_segmented_path() -> None:
    rng = np.random.default_rng(4)
    weights = rng.integers(0, 3, size=(5, 6)).astype(np.float64)
    values = rng.random(6)
    groups = np.array([0, 2, -1, 2, 1, 0], dtype=np.intp)
    dense = GroupedSums(groups, 3, values)(weights)
    expected = np.zeros((5, 3))
    for i, g in enumerate(groups):
        if g >= 0:
            expected[:, g] += weights[:, i] * values[i]
    np.testing.assert_allclose(dense, expected)
    # Many groups take the segmented path; one kept sample is enough to use it.
    many = 1_500_000  # 3 samples × 1.5 M groups is over the dense path's cell bound
    one = np.array([-1, 7, -1], dtype=np.intp)
    row = np.array([[2.0, 3.0, 1.0]])
    sums = GroupedSums(one, many, np.array([1.0, 2.5, 3.0]))(row)
    assert sums.shape == (1, many)
    assert sums[0, 7] == 7.5
    assert float(sums.sum()) == 7.5
