"""Reducers over repeats against the closed form and against brute force."""

import itertools
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evald_server.scoring import (
    RecordSamples,
    Reducer,
    majority_correct,
    pass_at_k,
    pass_hat_k,
    reduce_records,
)


@st.composite
def counts(draw: st.DrawFn, max_n: int = 300) -> tuple[int, int, int]:
    n = draw(st.integers(1, max_n))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@settings(max_examples=500, deadline=None)
@given(counts())
def test_pass_at_k_is_the_closed_form(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)


@settings(max_examples=500, deadline=None)
@given(counts())
def test_pass_hat_k_is_the_closed_form(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    exact = Fraction(math.comb(c, k), math.comb(n, k))
    assert pass_hat_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)


def test_both_match_a_brute_force_count_of_k_subsets_for_small_n() -> None:
    for n in range(1, 11):
        for c in range(n + 1):
            correct = [i < c for i in range(n)]
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(correct, k))
                some = Fraction(sum(any(s) for s in subsets), len(subsets))
                every = Fraction(sum(all(s) for s in subsets), len(subsets))
                assert pass_at_k(n, c, k) == pytest.approx(float(some), abs=1e-12), (n, c, k)
                assert pass_hat_k(n, c, k) == pytest.approx(float(every), abs=1e-12), (n, c, k)


def test_the_grid_of_large_n_is_stable_where_the_binomials_overflow_a_float() -> None:
    for n, c, k in [(200, 1, 100), (2000, 3, 1000), (2000, 1997, 10)]:
        exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)
    with pytest.raises(OverflowError):
        float(math.comb(2000, 1000))  # the naive ratio of floats cannot even be formed


def test_pass_at_k_is_not_the_biased_or_the_pass_at_n_estimate() -> None:
    # 10 samples, 3 correct: pass@1 is 0.3; "pass@n" would say 1.0, 1-(1-p)^k 0.51 at k=2
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)
    assert pass_at_k(10, 3, 2) != pytest.approx(1 - 0.7**2)
    assert pass_at_k(10, 0, 10) == 0.0
    assert pass_at_k(10, 1, 10) == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, 1, 4), (3, 1, 0), (0, 0, 1)])
def test_impossible_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="need 0 <= c <= n"):
        pass_at_k(n, c, k)


def test_majority_takes_the_most_frequent_answer_first_seen_in_a_tie() -> None:
    assert majority_correct(["4", "5", "4"], [True, False, True])
    assert not majority_correct(["5", "4", "5", "4"], [False, True, False, True])
    with pytest.raises(ValueError, match="one answer per sample"):
        majority_correct(["4"], [True, False])


def _records() -> list[RecordSamples]:
    return [
        RecordSamples("a", (True, False, False, False), ("1", "2", "2", "3")),
        RecordSamples("b", (True, True, True, True), ("x", "x", "x", "x")),
        RecordSamples("c", (False, False, False, False), ("y", "y", "z", "z")),
        RecordSamples("d", (True, False), ("p", "q")),  # two repeats failed for good
    ]


def test_reduce_records_averages_over_records_and_counts_the_short_ones() -> None:
    at2 = reduce_records(_records(), Reducer.PASS_AT_K, 2)
    assert at2.name == "pass@2"
    expected = (pass_at_k(4, 1, 2) + 1.0 + 0.0 + pass_at_k(2, 1, 2)) / 4
    assert at2.value == pytest.approx(expected)
    at3 = reduce_records(_records(), Reducer.PASS_AT_K, 3)
    assert (at3.records, at3.skipped) == (3, 1)
    assert at3.value == pytest.approx((pass_at_k(4, 1, 3) + 1.0 + 0.0) / 3)
    hat = reduce_records(_records(), Reducer.PASS_HAT_K, 2)
    assert hat.name == "pass^2"
    assert hat.value == pytest.approx((0 + 1 + 0 + 0) / 4)
    majority = reduce_records(_records(), Reducer.MAJORITY)
    assert majority.value == pytest.approx((0 + 1 + 0 + 1) / 4)
    mean = reduce_records(_records(), Reducer.MEAN)
    assert mean.value == pytest.approx((0.25 + 1 + 0 + 0.5) / 4)
    for metric in (at2, at3, hat, majority, mean):
        assert metric.interval.lower <= metric.value <= metric.interval.upper
        assert metric.interval.lower >= 0.0
        assert metric.interval.upper <= 1.0


def test_reduce_records_refuses_what_it_cannot_compute() -> None:
    with pytest.raises(ValueError, match="needs k >= 1"):
        reduce_records(_records(), Reducer.PASS_AT_K)
    with pytest.raises(ValueError, match="takes no k"):
        reduce_records(_records(), Reducer.MEAN, 2)
    with pytest.raises(ValueError, match="no record has enough samples"):
        reduce_records(_records(), Reducer.PASS_AT_K, 5)
    with pytest.raises(ValueError, match="majority needs its answers"):
        reduce_records([RecordSamples("a", (True,))], Reducer.MAJORITY)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=5, max_size=5), min_size=1, max_size=30))
def test_pass_at_1_is_the_mean_and_the_interval_holds_the_point(rows: list[list[bool]]) -> None:
    records = [RecordSamples(str(i), tuple(row)) for i, row in enumerate(rows)]
    at1 = reduce_records(records, Reducer.PASS_AT_K, 1)
    mean = reduce_records(records, Reducer.MEAN)
    assert at1.value == pytest.approx(mean.value)
    assert at1.interval.lower <= at1.value <= at1.interval.upper
    at5 = reduce_records(records, Reducer.PASS_AT_K, 5)
    assert at5.value >= at1.value - 1e-12  # more tries never lower pass@k
