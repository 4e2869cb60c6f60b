"""The comparison's numbers pinned exactly, not within a Monte Carlo tolerance: the
permutation p-value against a brute-force enumeration of every swap (few records) and
against a reference computation on the same seeded swaps (many records: the +1
correction, the swap weights and the number of swaps all show), the bootstrap interval
against the same seeded resamples and its widening to the observed delta, repeats moving
with their record, and the pure test functions at their edges."""

import itertools
import math

import numpy as np
import pytest
from numpy.typing import NDArray

from evald_server.comparison import (
    CONFIDENCE,
    DEFAULT_PERMUTATIONS,
    DEFAULT_RESAMPLES,
    UNPAIRED_IDS_SHOWN,
    PairedTest,
    compare_samples,
    mcnemar_exact,
    pair_samples,
    permutation_p_value,
)
from evald_server.comparison._tests import exhaustive, sign_flips
from evald_server.domain import TaskType
from evald_server.scoring import ScoringSample, score_task

Floats = NDArray[np.float64]
EPS = float(np.finfo(np.float64).eps)
WORDS = ["the", "quick", "brown", "fox", "jumps"]
GOLD = " ".join(WORDS)


def _qa(answers: list[int], run: str, *, repeats: int = 1) -> list[ScoringSample]:
    """QA samples answering the first k gold words (k per sample), ``repeats`` samples per
    record in a row: record ``r{i // repeats}``, repeat ``i % repeats``."""
    return [
        ScoringSample(
            subtask_id=f"{run}-{i}",
            record_id=f"r{i // repeats}",
            repeat_index=i % repeats,
            record={"question": "q", "answers": [GOLD]},
            output=" ".join(WORDS[:k]) or "nothing",
        )
        for i, k in enumerate(answers)
    ]


def _f1(samples: list[ScoringSample]) -> Floats:
    report = score_task(TaskType.QA, samples, resamples=1)
    return np.array([s.scores["f1"] for s in report.sample_scores], dtype=np.float64)


def _runs(
    seed: int, n: int, *, repeats: int = 1
) -> tuple[list[ScoringSample], list[ScoringSample], Floats, Floats]:
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 6, size=n * repeats)
    cand = np.clip(base + rng.choice([-1, 0, 1, 2], size=n * repeats), 0, 5)
    b, c = _qa(base.tolist(), "b", repeats=repeats), _qa(cand.tolist(), "c", repeats=repeats)
    return b, c, _f1(b), _f1(c)


def _swapped_deltas(masks: Floats, x: Floats, y: Floats, units: NDArray[np.intp]) -> Floats:
    """candidate − baseline mean for each swap mask (rows × records)."""
    swap = masks[:, units]
    return ((1.0 - 2.0 * swap) @ (y - x)) / x.size


def _p_value(null: Floats, observed: float, adjustment: int) -> float:
    gamma = abs(np.finfo(np.float64).eps * 100 * observed)
    less = (np.count_nonzero(null <= observed + gamma) + adjustment) / (null.size + adjustment)
    greater = (np.count_nonzero(null >= observed - gamma) + adjustment) / (null.size + adjustment)
    return min(1.0, 2.0 * min(less, greater))


def _f1_comparison(
    baseline: list[ScoringSample], candidate: list[ScoringSample], **options: int
) -> object:
    _, metrics = compare_samples(TaskType.QA, baseline, candidate, **options)
    return next(m for m in metrics if m.metric == "f1")


@pytest.mark.parametrize(("n", "repeats"), [(9, 1), (5, 3)])
def test_few_records_enumerate_every_swap_exactly(n: int, repeats: int) -> None:
    baseline, candidate, x, y = _runs(n, n, repeats=repeats)
    units = np.repeat(np.arange(n), repeats)
    masks = np.array(list(itertools.product((0.0, 1.0), repeat=n)))  # all 2^n swaps
    null = _swapped_deltas(masks, x, y, units)
    observed = float(np.mean(y - x))
    f1 = _f1_comparison(baseline, candidate, seed=4, permutations=1 << n)
    assert f1.test is PairedTest.PERMUTATION  # type: ignore[attr-defined]
    assert f1.delta == pytest.approx(observed, rel=1e-12, abs=1e-15)  # type: ignore[attr-defined]
    assert f1.p_value == _p_value(null, observed, adjustment=0)  # type: ignore[attr-defined]


def test_random_swaps_are_the_seeded_ones_with_the_plus_one_correction() -> None:
    # 2^40 swaps do not fit the default budget: DEFAULT_PERMUTATIONS random ones do.
    n, seed, permutations = 40, 6, DEFAULT_PERMUTATIONS
    baseline, candidate, x, y = _runs(1, n)
    masks = np.random.default_rng([seed, 1]).integers(0, 2, size=(permutations, n))
    null = _swapped_deltas(masks.astype(np.float64), x, y, np.arange(n))
    observed = float(np.mean(y - x))
    expected = _p_value(null, observed, adjustment=1)
    assert 0.0 < expected < 1.0  # a p-value that the +1 and every swap move
    f1 = _f1_comparison(baseline, candidate, seed=seed)
    assert f1.p_value == pytest.approx(expected, rel=1e-12)  # type: ignore[attr-defined]
    without_correction = _p_value(null, observed, adjustment=0)
    assert f1.p_value != pytest.approx(without_correction, rel=1e-9)  # type: ignore[attr-defined]
    one_more = _p_value(np.append(null, null[0]), observed, adjustment=1)
    assert f1.p_value != pytest.approx(one_more, rel=1e-9)  # type: ignore[attr-defined]


def test_defaults_and_a_single_swap_or_resample() -> None:
    baseline, candidate, _, _ = _runs(4, 3)
    f1 = _f1_comparison(baseline[:1], candidate[:1], seed=2, resamples=1, permutations=1)
    assert f1.interval.resamples == 1  # type: ignore[attr-defined]
    assert 0.0 <= f1.p_value <= 1.0  # type: ignore[attr-defined]
    default = _f1_comparison(baseline, candidate)
    assert default.interval.resamples == DEFAULT_RESAMPLES == 1000  # type: ignore[attr-defined]
    assert (default.interval.seed, default.interval.confidence_level) == (0, CONFIDENCE)  # type: ignore[attr-defined]
    assert DEFAULT_PERMUTATIONS == 10_000


@pytest.mark.parametrize("repeats", [1, 2])
def test_the_bootstrap_interval_is_the_percentiles_of_the_seeded_resamples(repeats: int) -> None:
    n, seed, resamples = 50, 8, 2_000
    baseline, candidate, x, y = _runs(2, n, repeats=repeats)
    units = np.repeat(np.arange(n), repeats)
    draws = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    counts = np.array([np.bincount(row, minlength=n) for row in draws], dtype=np.float64)
    weights = counts[:, units]
    deltas = (weights @ y - weights @ x) / weights.sum(axis=1)
    lower, upper = np.percentile(deltas, [2.5, 97.5])
    f1 = _f1_comparison(baseline, candidate, seed=seed, resamples=resamples)
    interval = f1.interval  # type: ignore[attr-defined]
    assert (interval.lower, interval.upper) == (pytest.approx(lower), pytest.approx(upper))
    assert (interval.confidence_level, interval.resamples, interval.seed) == (
        0.95,
        resamples,
        seed,
    )


def test_an_interval_missing_the_observed_delta_is_widened_to_it() -> None:
    baseline, candidate, x, y = _runs(3, 30)
    draws = np.random.default_rng(0).integers(0, 30, size=(1, 30))
    counts = np.bincount(draws[0], minlength=30).astype(np.float64)
    resampled = float((counts @ y - counts @ x) / counts.sum())
    observed = float(np.mean(y - x))
    assert resampled != pytest.approx(observed)
    f1 = _f1_comparison(baseline, candidate, seed=0, resamples=1)
    interval = f1.interval  # type: ignore[attr-defined]
    assert interval.lower == pytest.approx(min(resampled, observed), rel=1e-12)
    assert interval.upper == pytest.approx(max(resampled, observed), rel=1e-12)


def test_records_improved_worsened_and_unchanged_average_their_repeats() -> None:
    # Record r0: 5 → 3 and 1 → 5 (mean up); r1: 5 → 5 twice; r2: 4 → 2, 4 → 4 (down);
    # r3: 2 → 3, 3 → 2 (the same mean: unchanged).
    base = _qa([5, 1, 5, 5, 4, 4, 2, 3], "b", repeats=2)
    cand = _qa([3, 5, 5, 5, 2, 4, 3, 2], "c", repeats=2)
    f1 = _f1_comparison(base, cand, seed=1, permutations=16)
    counts = (f1.records_improved, f1.records_worsened, f1.records_unchanged)  # type: ignore[attr-defined]
    assert counts == (1, 1, 2)
    assert f1.record_score == "f1"  # type: ignore[attr-defined]


def test_each_metric_counts_records_by_its_own_per_sample_score() -> None:
    # r0: 3 → 4 words (f1 up, exact match 0 → 0); r1: 5 → 4 (both down); r2: 4 → 5 (both up).
    base, cand = _qa([3, 5, 4], "b"), _qa([4, 4, 5], "c")
    _, metrics = compare_samples(TaskType.QA, base, cand, seed=1)
    by_name = {m.metric: m for m in metrics}
    f1, exact = by_name["f1"], by_name["exact_match"]
    assert (f1.record_score, f1.records_improved, f1.records_worsened) == ("f1", 2, 1)
    assert (exact.record_score, exact.records_improved, exact.records_worsened) == (
        "exact_match",
        1,
        1,
    )
    assert exact.records_unchanged == 1
    assert exact.test is PairedTest.MCNEMAR_EXACT


def test_many_records_resample_and_swap_in_chunks_of_the_same_seeded_draws() -> None:
    # 2,100 samples: 499 weight rows per chunk, so 1,000 resamples and swaps take three.
    n, seed = 2_100, 9
    baseline, candidate, x, y = _runs(5, n)
    f1 = _f1_comparison(baseline, candidate, seed=seed, resamples=1_000, permutations=1_000)
    draws = np.random.default_rng(seed).integers(0, n, size=(1_000, n))
    counts = np.array([np.bincount(row, minlength=n) for row in draws], dtype=np.float64)
    deltas = (counts @ y - counts @ x) / n
    lower, upper = np.percentile(deltas, [2.5, 97.5])
    interval = f1.interval  # type: ignore[attr-defined]
    assert (interval.lower, interval.upper) == (pytest.approx(lower), pytest.approx(upper))
    masks = np.random.default_rng([seed, 1]).integers(0, 2, size=(1_000, n))
    null = _swapped_deltas(masks.astype(np.float64), x, y, np.arange(n))
    expected = _p_value(null, float(np.mean(y - x)), adjustment=1)
    assert f1.p_value == pytest.approx(expected, rel=1e-12)  # type: ignore[attr-defined]


def test_mcnemar_only_for_binary_proportions_with_one_sample_per_record() -> None:
    base = _qa([5, 0, 5, 0, 5, 5], "b")
    cand = _qa([0, 5, 5, 0, 0, 5], "c")
    _, metrics = compare_samples(TaskType.QA, base, cand, seed=1)
    exact = next(m for m in metrics if m.metric == "exact_match")
    assert exact.test is PairedTest.MCNEMAR_EXACT
    assert exact.p_value == mcnemar_exact(2, 1)  # right in the baseline only: r0, r4
    assert (exact.records_improved, exact.records_worsened) == (1, 2)
    _, repeated = compare_samples(
        TaskType.QA, _qa([5, 0, 5, 0], "b", repeats=2), _qa([0, 5, 5, 0], "c", repeats=2)
    )
    assert next(m for m in repeated if m.metric == "exact_match").test is PairedTest.PERMUTATION


def test_pairing_takes_answered_samples_in_both_runs_and_names_the_rest() -> None:
    base = _qa([1] * (UNPAIRED_IDS_SHOWN + 3), "b")
    cand = _qa([1, 2], "c")
    cand.append(ScoringSample("c-x", "extra", 0, {"question": "q", "answers": [GOLD]}, "x"))
    base[1] = ScoringSample("b-1", "r1", 0, base[1].record, None)  # failed in the baseline
    pairs = pair_samples(base, cand)
    summary = pairs.summary
    assert (summary.samples, summary.records) == (1, 1)
    assert summary.baseline_only_records == UNPAIRED_IDS_SHOWN + 1  # r2 … r102
    assert summary.baseline_only_record_ids == tuple(f"r{i}" for i in range(2, 102))
    assert (summary.candidate_only_records, summary.candidate_only_record_ids) == (
        2,
        ("r1", "extra"),
    )
    assert compare_samples(TaskType.QA, base[1:2], cand[:1]) == (
        pair_samples(base[1:2], cand[:1]).summary,
        (),
    )


@pytest.mark.parametrize(("resamples", "permutations"), [(0, 10), (10, 0)])
def test_at_least_one_resample_and_one_swap(resamples: int, permutations: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        compare_samples(TaskType.QA, [], [], resamples=resamples, permutations=permutations)


# --- the test functions themselves -----------------------------------------------------


@pytest.mark.parametrize(
    ("n", "budget", "expected"),
    [(3, 8, True), (3, 7, False), (0, 1, True), (62, 1 << 62, True), (63, 1 << 64, False)],
)
def test_swaps_are_enumerated_exactly_when_all_fit_the_budget(
    n: int, budget: int, expected: bool
) -> None:
    assert exhaustive(n, budget) is expected


def test_enumerated_swaps_are_every_pattern_once_in_chunks() -> None:
    chunks = list(sign_flips(4, 16, np.random.default_rng(0), chunk_rows=5))
    assert [c.shape for c in chunks] == [(5, 4), (5, 4), (5, 4), (1, 4)]
    rows = [tuple(int(v) for v in row) for chunk in chunks for row in chunk]
    assert rows == [tuple((code >> bit) & 1 for bit in range(4)) for code in range(16)]


def test_random_swaps_are_the_budget_in_chunks_of_the_seeded_draw() -> None:
    chunks = list(sign_flips(70, 11, np.random.default_rng(5), chunk_rows=4))
    assert [c.shape for c in chunks] == [(4, 70), (4, 70), (3, 70)]
    expected = np.random.default_rng(5).integers(0, 2, size=(11, 70))
    assert np.array_equal(np.vstack(chunks), expected)


@pytest.mark.parametrize(
    ("null", "observed", "exact", "expected"),
    [
        ([0.0, 0.0, 0.0], 1.0, True, 0.0),
        ([0.0, 0.0, 0.0], 1.0, False, 0.5),  # (0 + 1) / (3 + 1), twice
        ([0.0, 1.0, 2.0, 3.0], 2.0, True, 1.0),  # 2 · min(3/4, 2/4), capped
        ([0.0, 1.0, 2.0, 3.0], 3.0, True, 0.5),  # 2 · 1/4
        ([0.0, 1.0, 2.0, 3.0], 3.0, False, 0.8),  # 2 · (1 + 1) / (4 + 1)
        ([-3.0, -2.0, 0.0, 1.0], -3.0, True, 0.5),  # the lower tail
        ([1.0 + 1e-14, 5.0], 1.0, True, 1.0),  # within 100 ulp: a tie, counted
        ([1.0 + 1e-12, 5.0], 1.0, True, 0.0),  # beyond: not a tie
        ([1.0 + 100 * EPS, 5.0], 1.0, True, 1.0),  # 100 ulp: still a tie
        ([1.0 + 101 * EPS, 5.0], 1.0, True, 0.0),  # 101 ulp: not one
        ([1.0 - 100 * EPS, -5.0], 1.0, True, 1.0),  # the same below
        ([1.0 - 101 * EPS, -5.0], 1.0, True, 0.0),
        ([0.0, -1.0], 0.0, True, 1.0),  # observed 0: only equal values tie
        ([0.0, 1.0], 0.0, True, 1.0),
        ([0.0, 1.0, 2.0, 3.0], 0.0, False, 0.8),  # the lower tail, +1: 2 · (1 + 1) / (4 + 1)
    ],
)
def test_the_permutation_p_value_counts_both_tails(
    null: list[float], observed: float, exact: bool, expected: float
) -> None:
    p = permutation_p_value(np.array(null), observed, exact=exact)
    assert p == pytest.approx(expected, abs=1e-15)


def test_an_empty_permutation_distribution_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        permutation_p_value(np.array([]), 0.0, exact=True)


def test_mcnemar_refuses_negative_counts_and_sums_the_lower_tail() -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        mcnemar_exact(-1, 2)
    with pytest.raises(ValueError, match="must not be negative"):
        mcnemar_exact(2, -1)
    assert mcnemar_exact(0, 0) == 1.0
    # b = 1, c = 4: 2 · P(X ≤ 1), X ~ Binomial(5, 1/2) = 2 · 6/32.
    assert mcnemar_exact(1, 4) == pytest.approx(2 * 6 / 32, rel=1e-12)
    assert mcnemar_exact(4, 1) == pytest.approx(2 * 6 / 32, rel=1e-12)
    assert mcnemar_exact(3, 3) == 1.0
    assert mcnemar_exact(0, 30) == pytest.approx(2 * 2.0**-30, rel=1e-12)
    assert math.isclose(mcnemar_exact(2, 5), 2 * (1 + 7 + 21) / 128, rel_tol=1e-12)
