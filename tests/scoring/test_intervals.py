"""Intervals: Wilson values, bootstrap containment, shrinkage, seeding, and the
vectorised resample statistics against recomputation on expanded sample lists."""

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from evald_server.domain import TaskType, ToolCall, encode_tool_answer
from evald_server.scoring import IntervalMethod, ScoreReport, ScoringSample, score_task, scorer_for
from evald_server.scoring import _intervals as intervals
from evald_server.scoring._common import BaseScorer
from evald_server.scoring._intervals import (
    GroupedSums,
    bootstrap_distribution,
    record_units,
    wilson_interval,
)
from tests.scoring._factories import make_sample, samples_of

PROPORTIONS = {
    "accuracy",
    "exact_match",
    "unmapped_rate",
    "schema_valid_rate",
    "json_valid_rate",
}


def _classification(rng: random.Random, n: int) -> list[ScoringSample]:
    labels = ["a", "b", "c", "d"]
    pairs = []
    for _ in range(n):
        gold = rng.choice(labels)
        output = gold if rng.random() < 0.6 else rng.choice([*labels, "??"])
        pairs.append(({"input": "x", "label": gold}, output))
    return samples_of(pairs)


def _qa(rng: random.Random, n: int) -> list[ScoringSample]:
    words = ["red", "blue", "green", "sky", "sea"]
    pairs = []
    for _ in range(n):
        answer = " ".join(rng.sample(words, 2))
        output = rng.choice([answer, words[0], "nothing", f"{answer} {words[1]}"])
        pairs.append(({"question": "q", "answers": [answer]}, output))
    return samples_of(pairs)


def _ner(rng: random.Random, n: int) -> list[ScoringSample]:
    pairs = []
    for i in range(n):
        gold = [{"text": f"e{i}{j}", "type": rng.choice(["PER", "LOC"])} for j in range(3)]
        predicted = [e for e in gold if rng.random() < 0.6] + [{"text": "zz", "type": "PER"}]
        pairs.append(({"text": "t", "entities": gold}, str(predicted).replace("'", '"')))
    return samples_of(pairs)


def _summarization(rng: random.Random, n: int) -> list[ScoringSample]:
    words = ["the", "cat", "sat", "on", "mat", "dog", "ran"]
    pairs = []
    for _ in range(n):
        summary = " ".join(rng.choices(words, k=6))
        pairs.append(({"document": "d", "summary": summary}, " ".join(rng.choices(words, k=5))))
    return samples_of(pairs)


def _generation(rng: random.Random, n: int) -> list[ScoringSample]:
    return samples_of(
        [
            ({"input": "q", "reference": "yes"}, "yes" if rng.random() < 0.7 else "no")
            for _ in range(n)
        ]
    )


CODE_RECORD = {
    "prompt": "def f():\n",
    "test": "def check(candidate):\n    assert candidate()\n",
    "entry_point": "f",
}


def _code(rng: random.Random, n: int) -> list[ScoringSample]:
    """Samples whose stored sandbox runs passed 60 % of the time (the rest: failed)."""
    return [
        dataclasses.replace(
            s,
            execution={
                "verdict": "passed" if rng.random() < 0.6 else "failed",
                "reason": "",
                "extraction_rule": "fence",
            },
        )
        for s in samples_of([(CODE_RECORD, "```python\ndef f(): ...\n```")] * n)
    ]


def _multiple_choice(rng: random.Random, n: int) -> list[ScoringSample]:
    pairs = []
    for _ in range(n):
        gold = rng.randrange(4)
        record = {
            "question": "q",
            "choices": ["w", "x", "y", "z"],
            "answer_index": gold,
            "metadata": {"subject": rng.choice(["law", "art", "math"])},
        }
        output = "ABCD"[gold] if rng.random() < 0.6 else rng.choice(["A", "B", "C", "D", "??"])
        pairs.append((record, output))
    return samples_of(pairs)


TOOL_RECORD = {
    "input": "q",
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
            },
        }
    ],
    "expected_calls": [{"name": "f", "arguments": {"a": 1}}],
}
TOOL_ANSWERS = [
    encode_tool_answer("", (ToolCall("f", {"a": 1}),)),
    encode_tool_answer("", (ToolCall("f", {"a": 2}),)),
    encode_tool_answer("no call", ()),
    encode_tool_answer("", (ToolCall("f", {"a": 1}), ToolCall("g", {}))),
    encode_tool_answer("", (ToolCall("f", None, "{", "arguments are not JSON"),)),
]


def _tool_call(rng: random.Random, n: int) -> list[ScoringSample]:
    return samples_of([(TOOL_RECORD, rng.choice(TOOL_ANSWERS)) for _ in range(n)])


STRUCTURED_RECORD = {
    "input": "q",
    "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    "reference": {"a": 1},
}
JSON_ANSWERS = [
    '{"a": 1}',
    '{"a": 2}',
    '{"a": "1"}',
    "not JSON",
    '{"a": 1, "b": [2]}',
    "```\n{}\n```",
]


def _structured_output(rng: random.Random, n: int) -> list[ScoringSample]:
    pairs = []
    for _ in range(n):
        record = dict(STRUCTURED_RECORD)
        if rng.random() < 0.3:
            del record["reference"]
        pairs.append((record, rng.choice(JSON_ANSWERS)))
    return samples_of(pairs)


BUILDERS: dict[TaskType, Callable[[random.Random, int], list[ScoringSample]]] = {
    TaskType.CLASSIFICATION: _classification,
    TaskType.QA: _qa,
    TaskType.NER: _ner,
    TaskType.SUMMARIZATION: _summarization,
    TaskType.GENERATION: _generation,
    TaskType.MULTIPLE_CHOICE: _multiple_choice,
    TaskType.CODE: _code,
    TaskType.TOOL_CALL: _tool_call,
    TaskType.STRUCTURED_OUTPUT: _structured_output,
}


def _check_intervals(report: ScoreReport, seed: int) -> None:
    assert set(report.uncertainty) == set(report.metrics)
    for metric, point in report.metrics.items():
        uncertainty = report.uncertainty[metric]
        boot = uncertainty.bootstrap
        assert 0.0 <= boot.lower <= point <= boot.upper <= 1.0, metric
        assert boot.method is IntervalMethod.BOOTSTRAP_PERCENTILE
        assert (boot.resamples, boot.seed, boot.confidence_level) == (1000, seed, 0.95)
        if metric in PROPORTIONS:
            assert uncertainty.analytic is not None
            assert uncertainty.analytic.method is IntervalMethod.WILSON
            assert 0.0 <= uncertainty.analytic.lower <= point <= uncertainty.analytic.upper <= 1.0
        else:
            assert uncertainty.analytic is None


@pytest.mark.parametrize("task_type", list(TaskType))
@pytest.mark.parametrize("n", [1, 2, 7, 60])
def test_intervals_contain_the_point_estimate(task_type: TaskType, n: int) -> None:
    samples = BUILDERS[task_type](random.Random(n), n)
    _check_intervals(score_task(task_type, samples, seed=n), seed=n)


@pytest.mark.parametrize("task_type", list(TaskType))
def test_intervals_shrink_as_n_grows(task_type: TaskType) -> None:
    small = score_task(task_type, BUILDERS[task_type](random.Random(1), 100), seed=3)
    large = score_task(task_type, BUILDERS[task_type](random.Random(2), 5000), seed=3)
    for metric in small.metrics:
        small_u, large_u = small.uncertainty[metric], large.uncertainty[metric]
        small_width = small_u.bootstrap.upper - small_u.bootstrap.lower
        large_width = large_u.bootstrap.upper - large_u.bootstrap.lower
        assert 0 < large_width < small_width / 3, metric  # ~ 1/sqrt(50) ≈ 0.14 expected
        if small_u.analytic is not None and large_u.analytic is not None:
            small_width = small_u.analytic.upper - small_u.analytic.lower
            assert large_u.analytic.upper - large_u.analytic.lower < small_width / 3


def test_the_seed_decides_the_bootstrap() -> None:
    samples = _classification(random.Random(0), 300)
    first = score_task(TaskType.CLASSIFICATION, samples, seed=11)
    again = score_task(TaskType.CLASSIFICATION, samples, seed=11)
    other = score_task(TaskType.CLASSIFICATION, samples, seed=12)
    assert first.uncertainty == again.uncertainty
    assert first.uncertainty["f1_macro"] != other.uncertainty["f1_macro"]


@pytest.mark.parametrize(
    ("successes", "n", "lower", "upper"),
    [
        (8, 10, 0.4902, 0.9433),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (50, 100, 0.4038, 0.5962),
    ],
)
def test_wilson_known_values(successes: int, n: int, lower: float, upper: float) -> None:
    interval = wilson_interval(successes, n)
    assert interval.lower == pytest.approx(lower, abs=1e-4)
    assert interval.upper == pytest.approx(upper, abs=1e-4)


@pytest.mark.parametrize("task_type", list(TaskType))
def test_resample_statistic_equals_recomputation(task_type: TaskType) -> None:
    """statistic(W) must equal the metrics of the sample list with sample i taken W[i] times;
    so must the bootstrap's statistic over groups, given W summed per group."""
    rng = random.Random(5)
    samples = BUILDERS[task_type](rng, 40)
    scorer = scorer_for(task_type)
    assert isinstance(scorer, BaseScorer)
    evaluation = scorer.evaluate(samples, samples)
    weights = np.random.default_rng(0).integers(0, 4, size=(6, len(samples))).astype(np.float64)
    weights[:, 0] += 1  # no empty resample
    statistics = [evaluation.statistic(weights)]
    if evaluation.grouped is not None:
        groups, over_groups = evaluation.grouped
        per_group = np.zeros((weights.shape[0], groups.count))
        for i, group in enumerate(groups.of.tolist()):
            per_group[:, group] += weights[:, i]
        statistics.append(over_groups(per_group))
    for row in range(weights.shape[0]):
        expanded = [s for s, w in zip(samples, weights[row], strict=True) for _ in range(int(w))]
        expected = scorer.evaluate(expanded, samples).metrics
        for metric, value in expected.items():
            for resampled in statistics:
                assert resampled[metric][row] == pytest.approx(value, abs=1e-12), metric


def test_grouped_sums_match_a_loop() -> None:
    rng = np.random.default_rng(1)
    groups = rng.integers(-1, 5, size=50)
    values = rng.random(50)
    weights = rng.integers(0, 3, size=(4, 50)).astype(np.float64)
    expected = np.zeros((4, 5))
    for r in range(4):
        for i in range(50):
            if groups[i] >= 0:
                expected[r, groups[i]] += weights[r, i] * values[i]
    assert np.allclose(GroupedSums(groups, 5, values)(weights), expected)
    # The segmented-sum path, used for many groups.
    many = GroupedSums(groups, 1 << 20, values)(weights)
    assert np.allclose(many[:, :5], expected)
    assert not many[:, 5:].any()


def test_bootstrap_draws_whole_records() -> None:
    record_ids = ["a", "a", "b", "c", "c", "c"]
    units, n_units = record_units(record_ids)
    seen: list[np.ndarray] = []

    def statistic(weights: np.ndarray) -> dict[str, np.ndarray]:
        seen.append(weights.copy())
        return {"n": weights.sum(axis=1)}

    bootstrap_distribution(units, n_units, statistic, seed=0, resamples=50)
    weights = np.concatenate(seen)
    assert weights.shape == (50, 6)
    # Each resample draws 3 records with replacement; a record's samples move together.
    counts = weights[:, [0, 2, 3]]
    assert (counts.sum(axis=1) == 3).all()
    assert (weights[:, 0] == weights[:, 1]).all()
    assert (weights[:, 3] == weights[:, 4]).all()
    assert (weights[:, 4] == weights[:, 5]).all()


def test_repeats_do_not_narrow_the_bootstrap() -> None:
    """k identical repeats per record carry no more information than one."""
    rng = random.Random(3)
    records = [({"input": "q", "reference": "yes"}, rng.choice(["yes", "no"])) for _ in range(80)]
    once = [make_sample(r, o, index=i) for i, (r, o) in enumerate(records)]
    thrice = [
        make_sample(r, o, index=i, repeat=k) for i, (r, o) in enumerate(records) for k in range(3)
    ]
    single = score_task(TaskType.GENERATION, once, seed=4)
    repeated = score_task(TaskType.GENERATION, thrice, seed=4)
    assert repeated.metrics == single.metrics
    assert repeated.uncertainty["accuracy"].bootstrap == single.uncertainty["accuracy"].bootstrap


@pytest.mark.parametrize("n", [7, 1001])
def test_the_chunk_size_does_not_change_the_bootstrap(
    n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resamples are drawn chunk by chunk to bound a worker's memory; the draws are the
    same whatever the chunk size, so the distribution is too (up to the summation order
    of float sums: integer counts are exact)."""
    rng = random.Random(n)
    units, n_units = record_units([f"r{rng.randrange(n)}" for _ in range(n)])
    values = np.array([rng.random() for _ in range(n)])

    def run() -> tuple[np.ndarray, np.ndarray]:
        seen: list[np.ndarray] = []

        def statistic(weights: np.ndarray) -> dict[str, np.ndarray]:
            seen.append(weights.copy())
            return {"mean": (weights @ values) / weights.sum(axis=1)}

        mean = bootstrap_distribution(units, n_units, statistic, seed=3, resamples=101)["mean"]
        return np.concatenate(seen), mean

    whole_weights, whole = run()
    monkeypatch.setattr(intervals, "_CHUNK_CELLS", 1)  # one resample per chunk
    chunked_weights, chunked = run()
    assert np.array_equal(whole_weights, chunked_weights)
    np.testing.assert_allclose(whole, chunked, rtol=1e-12)


def _classification_evaluation(repeat: int, n: int = 400) -> tuple[Any, np.ndarray, int]:
    rng = random.Random(9)
    samples = [
        dataclasses.replace(s, subtask_id=f"{s.subtask_id}.{k}", repeat_index=k)
        for s in _classification(rng, n)
        for k in range(repeat)
    ]
    scorer = scorer_for(TaskType.CLASSIFICATION)
    assert isinstance(scorer, BaseScorer)
    evaluation = scorer.evaluate(samples, samples)
    assert evaluation.grouped is not None
    units, n_units = record_units([s.record_id for s in samples])
    return evaluation, units, n_units


@pytest.mark.parametrize("repeat", [1, 3])
def test_counts_drawn_per_kind_of_record_give_the_per_sample_distribution(repeat: int) -> None:
    """Classification's bootstrap draws each resample's count of records of each kind
    (multinomial) instead of the records: its percentiles are the per-sample bootstrap's
    up to Monte Carlo noise (~0.0015 here; a resample of samples instead of records
    with repeat 3 would move the 2.5th percentile by ~0.02)."""
    evaluation, units, n_units = _classification_evaluation(repeat)
    groups, over_groups = evaluation.grouped
    resamples = 4000
    by_kind = bootstrap_distribution(
        units, n_units, over_groups, seed=4, resamples=resamples, groups=groups
    )
    expected = bootstrap_distribution(
        units, n_units, evaluation.statistic, seed=5, resamples=resamples
    )
    assert by_kind.keys() == expected.keys()
    for metric, values in expected.items():
        quantiles = np.percentile(values, [2.5, 50, 97.5])
        np.testing.assert_allclose(
            np.percentile(by_kind[metric], [2.5, 50, 97.5]), quantiles, atol=0.006, err_msg=metric
        )


def test_the_multinomial_counts_have_the_bootstrap_moments() -> None:
    """A resample's count per group: mean n·p and variance n·p·(1 − p), as n records
    drawn with replacement give (repeat 1: a record's kind is its group)."""
    evaluation, units, n_units = _classification_evaluation(1)
    groups, _ = evaluation.grouped
    seen: list[np.ndarray] = []

    def statistic(weights: np.ndarray) -> dict[str, np.ndarray]:
        seen.append(weights.copy())
        return {"n": weights.sum(axis=1)}

    resamples = 20_000
    bootstrap_distribution(units, n_units, statistic, seed=1, resamples=resamples, groups=groups)
    counts = np.concatenate(seen)
    assert counts.shape == (resamples, groups.count)
    assert (counts.sum(axis=1) == n_units).all()
    p = np.bincount(groups.of, minlength=groups.count) / n_units
    standard_error = np.sqrt(n_units * p * (1 - p) / resamples)
    assert np.all(np.abs(counts.mean(axis=0) - n_units * p) <= 5 * standard_error + 1e-12)
    np.testing.assert_allclose(counts.var(axis=0), n_units * p * (1 - p), rtol=0.05, atol=1e-12)


@pytest.mark.parametrize("repeat", [1, 3])
def test_records_of_too_many_kinds_are_drawn_one_by_one(
    repeat: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the bound on kinds the records are drawn one by one, and the statistic over
    groups gives the per-sample distribution of the same seed to the last bit."""
    monkeypatch.setattr(intervals, "_MAX_KINDS", 0)
    evaluation, units, n_units = _classification_evaluation(repeat)
    groups, over_groups = evaluation.grouped
    by_group = bootstrap_distribution(
        units, n_units, over_groups, seed=4, resamples=50, groups=groups
    )
    expected = bootstrap_distribution(units, n_units, evaluation.statistic, seed=4, resamples=50)
    assert by_group.keys() == expected.keys()
    for metric, values in expected.items():
        assert by_group[metric].tobytes() == values.tobytes(), metric
