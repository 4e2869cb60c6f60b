"""The comparison's statistics against scipy and statsmodels on generated data."""

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from evald_server.comparison import PairedTest, compare_samples, mcnemar_exact
from evald_server.domain import TaskType
from evald_server.scoring import ScoringSample


def _generation(outputs: list[tuple[str, bool]], run: str) -> list[ScoringSample]:
    """Generation samples whose correctness is given: reference "yes", output yes / no."""
    return [
        ScoringSample(
            subtask_id=f"{run}-{rid}",
            record_id=rid,
            repeat_index=0,
            record={"input": "q", "reference": "yes"},
            output="yes" if right else "no",
        )
        for rid, right in outputs
    ]


def _qa(f1_outputs: list[tuple[str, str]], run: str, repeat: int = 0) -> list[ScoringSample]:
    return [
        ScoringSample(
            subtask_id=f"{run}-{rid}-{repeat}",
            record_id=rid,
            repeat_index=repeat,
            record={"question": "q", "answers": ["the quick brown fox jumps"]},
            output=output,
        )
        for rid, output in f1_outputs
    ]


@pytest.mark.parametrize(("b", "c"), [(0, 0), (1, 0), (3, 9), (12, 12), (40, 61), (700, 810)])
def test_mcnemar_exact_matches_statsmodels(b: int, c: int) -> None:
    expected = mcnemar([[50, b], [c, 50]], exact=True).pvalue
    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_accuracy_uses_mcnemar_on_discordant_pairs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    base = rng.random(n) < 0.70
    cand = rng.random(n) < 0.62
    ids = [f"r{i}" for i in range(n)]
    pairing, metrics = compare_samples(
        TaskType.GENERATION,
        _generation(list(zip(ids, base.tolist(), strict=True)), "b"),
        _generation(list(zip(ids, cand.tolist(), strict=True)), "c"),
        seed=seed,
    )
    (accuracy,) = metrics
    assert pairing.samples == n
    assert accuracy.test is PairedTest.MCNEMAR_EXACT
    assert accuracy.baseline == pytest.approx(base.mean())
    assert accuracy.candidate == pytest.approx(cand.mean())
    b, c = int((base & ~cand).sum()), int((~base & cand).sum())
    table = [[int((base & cand).sum()), b], [c, int((~base & ~cand).sum())]]
    assert accuracy.p_value == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-9)
    assert accuracy.records_improved == c
    assert accuracy.records_worsened == b
    assert accuracy.records_unchanged == n - b - c


def _qa_pairs(rng: np.random.Generator, n: int, shift: float) -> tuple[list[str], list[str]]:
    """Two runs' QA answers: the number of gold words each gets right, shifted for one."""
    words = ["the", "quick", "brown", "fox", "jumps"]
    base_k = rng.integers(0, 6, size=n)
    cand_k = np.clip(
        base_k + rng.choice([-1, 0, 1], size=n, p=[0.5 - shift, 0.3, 0.2 + shift]), 0, 5
    )
    answer = lambda k: " ".join(words[:k]) or "nothing"  # noqa: E731
    return [answer(int(k)) for k in base_k], [answer(int(k)) for k in cand_k]


def _f1_columns(
    samples_b: list[ScoringSample], samples_c: list[ScoringSample]
) -> tuple[np.ndarray, np.ndarray]:
    from evald_server.scoring import score_task

    b = score_task(TaskType.QA, samples_b, resamples=1)
    c = score_task(TaskType.QA, samples_c, resamples=1)
    return (
        np.array([s.scores["f1"] for s in b.sample_scores]),
        np.array([s.scores["f1"] for s in c.sample_scores]),
    )


def test_permutation_p_value_is_scipys_exact_one_for_few_records() -> None:
    rng = np.random.default_rng(7)
    base_out, cand_out = _qa_pairs(rng, 11, 0.25)
    ids = [f"r{i}" for i in range(11)]
    samples_b = _qa(list(zip(ids, base_out, strict=True)), "b")
    samples_c = _qa(list(zip(ids, cand_out, strict=True)), "c")
    _, metrics = compare_samples(TaskType.QA, samples_b, samples_c, seed=3)
    f1 = next(m for m in metrics if m.metric == "f1")
    x, y = _f1_columns(samples_b, samples_c)
    reference = stats.permutation_test(
        (x, y),
        lambda a, b, axis: np.mean(b, axis=axis) - np.mean(a, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=10_000,  # 2^11 < 10,000: scipy enumerates every swap, as we do
    )
    assert f1.test is PairedTest.PERMUTATION
    assert f1.delta == pytest.approx(y.mean() - x.mean())
    assert f1.p_value == pytest.approx(reference.pvalue, rel=1e-12)


def test_permutation_p_value_and_bootstrap_interval_agree_with_scipy_on_many_records() -> None:
    rng = np.random.default_rng(11)
    n = 300
    base_out, cand_out = _qa_pairs(rng, n, 0.08)
    ids = [f"r{i}" for i in range(n)]
    samples_b = _qa(list(zip(ids, base_out, strict=True)), "b")
    samples_c = _qa(list(zip(ids, cand_out, strict=True)), "c")
    _, metrics = compare_samples(
        TaskType.QA, samples_b, samples_c, seed=5, resamples=10_000, permutations=20_000
    )
    f1 = next(m for m in metrics if m.metric == "f1")
    x, y = _f1_columns(samples_b, samples_c)
    statistic = lambda a, b, axis: np.mean(b, axis=axis) - np.mean(a, axis=axis)  # noqa: E731
    reference = stats.permutation_test(
        (x, y), statistic, permutation_type="samples", vectorized=True, n_resamples=20_000, rng=1
    )
    # Both Monte Carlo with 20,000 swaps: the standard error of either is under 0.004.
    assert f1.p_value == pytest.approx(reference.pvalue, abs=0.015)
    interval = stats.bootstrap(
        (x, y),
        statistic,
        paired=True,
        vectorized=True,
        method="percentile",
        n_resamples=10_000,
        rng=2,
    ).confidence_interval
    assert f1.interval.lower == pytest.approx(interval.low, abs=0.006)
    assert f1.interval.upper == pytest.approx(interval.high, abs=0.006)
    assert f1.interval.lower <= f1.delta <= f1.interval.upper


def _classification(labels: list[tuple[str, str, str]], run: str) -> list[ScoringSample]:
    """(record id, gold, predicted) → classification samples over three labels."""
    return [
        ScoringSample(
            subtask_id=f"{run}-{rid}",
            record_id=rid,
            repeat_index=0,
            record={"input": "x", "label": gold, "choices": ["red", "green", "blue"]},
            output=predicted,
        )
        for rid, gold, predicted in labels
    ]


def test_macro_f1_values_are_sklearns_on_the_paired_samples_and_use_permutation() -> None:
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(4)
    labels = np.array(["red", "green", "blue"])
    n = 120
    gold = labels[rng.integers(0, 3, size=n)]
    base_pred = np.where(rng.random(n) < 0.8, gold, labels[rng.integers(0, 3, size=n)])
    cand_pred = np.where(rng.random(n) < 0.6, gold, labels[rng.integers(0, 3, size=n)])
    ids = [f"r{i}" for i in range(n)]
    base = _classification(list(zip(ids, gold, base_pred, strict=True)), "b")
    # The candidate lost two records and answered one extra that the baseline did not.
    cand = _classification(list(zip(ids, gold, cand_pred, strict=True))[2:], "c")
    cand += _classification([("extra", "red", "red")], "c")
    pairing, metrics = compare_samples(TaskType.CLASSIFICATION, base, cand, seed=1)
    assert pairing.samples == n - 2
    assert pairing.baseline_only_record_ids == ("r0", "r1")
    assert pairing.candidate_only_record_ids == ("extra",)
    by_name = {m.metric: m for m in metrics}
    assert set(by_name) == {"accuracy", "f1_macro", "precision_macro", "recall_macro"}
    f1 = by_name["f1_macro"]
    assert f1.baseline == pytest.approx(f1_score(gold[2:], base_pred[2:], average="macro"))
    assert f1.candidate == pytest.approx(f1_score(gold[2:], cand_pred[2:], average="macro"))
    assert f1.test is PairedTest.PERMUTATION
    assert f1.delta < 0
    assert f1.interval.upper < 0  # a 20-point drop on 118 records is far beyond noise
    assert f1.p_value < 0.01
    assert by_name["accuracy"].test is PairedTest.MCNEMAR_EXACT


def test_repeats_move_with_their_record_and_a_run_against_itself_shows_no_change() -> None:
    rng = np.random.default_rng(9)
    n = 60
    ids = [f"r{i}" for i in range(n)]
    words = ["the", "quick", "brown", "fox", "jumps"]
    samples: list[ScoringSample] = []
    for repeat in range(3):
        answers = [" ".join(words[: int(k)]) or "none" for k in rng.integers(0, 6, size=n)]
        samples += _qa(list(zip(ids, answers, strict=True)), "b", repeat)
    pairing, metrics = compare_samples(TaskType.QA, samples, samples, seed=2)
    assert (pairing.samples, pairing.records) == (3 * n, n)
    for metric in metrics:
        # Three repeats per record: never McNemar (its pairs would not be independent).
        assert metric.test is PairedTest.PERMUTATION
        assert metric.delta == 0.0
        assert metric.p_value == 1.0
        assert (metric.interval.lower, metric.interval.upper) == (0.0, 0.0)
        assert metric.records_unchanged == n
