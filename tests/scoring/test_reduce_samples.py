"""The reducers over a scored task: each scorer's per-sample correctness and answer
keys (``SampleCorrectness``), grouped by record, then pass@k / pass^k / majority / mean."""

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evald_server.domain import TaskType
from evald_server.scoring import (
    CORRECTNESS,
    RecordSamples,
    Reducer,
    SampleCorrectness,
    ScoringSample,
    pass_at_k,
    pass_hat_k,
    record_samples,
    reduce_records,
    reduce_samples,
    score_task,
)
from tests.scoring._factories import make_sample
from tests.scoring.test_intervals import STRUCTURED_RECORD, TOOL_ANSWERS, TOOL_RECORD

_RECORDS: dict[TaskType, tuple[Mapping[str, Any], str, str]] = {
    # task type: (record, a right output, a wrong output)
    TaskType.CLASSIFICATION: ({"input": "t", "label": "pos"}, "pos", "neg"),
    TaskType.QA: ({"question": "q", "answers": ["Paris"]}, "paris.", "Lyon"),
    TaskType.MULTIPLE_CHOICE: (
        {"question": "q", "choices": ["a", "b", "c"], "answer_index": 1},
        "B",
        "C",
    ),
    TaskType.GENERATION: ({"input": "q", "reference": "#### 42", "match": "numeric"}, "42", "41"),
    TaskType.NER: (
        {"text": "t", "entities": [{"text": "Ada", "type": "PER"}]},
        '[{"text": "Ada", "type": "PER"}]',
        "[]",
    ),
    TaskType.SUMMARIZATION: ({"document": "d", "summary": "a b c"}, "a b c", "x"),
    TaskType.TOOL_CALL: (TOOL_RECORD, TOOL_ANSWERS[0], TOOL_ANSWERS[1]),
    TaskType.STRUCTURED_OUTPUT: (STRUCTURED_RECORD, '{"a": 1}', '{"a": 2}'),
    # For code the "output" here is the verdict of its stored sandbox run.
    TaskType.CODE: (
        {"prompt": "def f():\n", "test": "def check(c):\n    assert c()\n", "entry_point": "f"},
        "passed",
        "failed",
    ),
}


def _with_execution(sample: ScoringSample) -> ScoringSample:
    """A code sample as scoring reads it: the answer, and the verdict its run got."""
    verdict = sample.output
    execution = {"verdict": verdict, "reason": "", "extraction_rule": "fence"}
    return dataclasses.replace(sample, output="```python\n...\n```", execution=execution)


def test_the_correctness_table_names_every_task_type() -> None:
    assert set(CORRECTNESS) == set(TaskType)


@pytest.mark.parametrize("task_type", list(TaskType))
def test_each_scorer_gives_what_the_table_says(task_type: TaskType) -> None:
    record, right, wrong = _RECORDS[task_type]
    samples = [
        make_sample(record, output, index=i, record_id="r", repeat=i)
        for i, output in enumerate([right, wrong, right])
    ]
    if task_type is TaskType.CODE:
        samples = [_with_execution(s) for s in samples]
    report = score_task(task_type, samples, resamples=10)
    given = CORRECTNESS[task_type]
    if not given.correct:
        assert report.correctness is None
        return
    correctness = report.correctness
    assert correctness is not None
    assert correctness.n_units == 1
    assert correctness.correct.tolist() == [1, 0, 1]
    assert (correctness.answers is not None) is given.answers
    if given.answers:
        (grouped,) = record_samples(correctness)
        assert grouped.answers is not None
        assert grouped.answers[0] == grouped.answers[2] != grouped.answers[1]


def test_qa_answers_vote_in_their_normalised_form() -> None:
    record = {"question": "q", "answers": ["Paris"]}
    outputs = {"r1": ["Lyon", "paris.", "The Paris", "Lyon "], "r2": ["Paris", "Nice", "Rome"]}
    samples = [
        make_sample(record, output, index=i, record_id=rid, repeat=i)
        for rid, answers in outputs.items()
        for i, output in enumerate(answers)
    ]
    report = score_task(TaskType.QA, samples, resamples=10)
    assert report.correctness is not None
    majority, at2, hat2, mean = reduce_samples(
        report.correctness,
        [
            (Reducer.MAJORITY, None),
            (Reducer.PASS_AT_K, 2),
            (Reducer.PASS_HAT_K, 2),
            (Reducer.MEAN, None),
        ],
        resamples=50,
    )
    # r1: "lyon" twice beats "paris" twice (first seen wins the tie) → wrong; r2: three
    # different answers, the first ("paris") wins → right.
    assert (majority.name, majority.value) == ("majority", 0.5)
    assert at2.name == "pass@2"
    assert at2.value == pytest.approx((pass_at_k(4, 2, 2) + pass_at_k(3, 1, 2)) / 2)
    assert hat2.value == pytest.approx((pass_hat_k(4, 2, 2) + pass_hat_k(3, 1, 2)) / 2)
    assert mean.value == pytest.approx((2 / 4 + 1 / 3) / 2)
    for metric in (majority, at2, hat2, mean):
        assert (metric.records, metric.skipped) == (2, 0)
        assert metric.interval.lower <= metric.value <= metric.interval.upper


def test_records_short_of_k_and_records_never_answered_are_counted_as_skipped() -> None:
    correctness = SampleCorrectness.of(
        ["a", "a", "a", "b", "b", "c", "c", "c"],
        [True, False, False, True, True, False, False, True],
    )
    (at3,) = reduce_samples(correctness, [(Reducer.PASS_AT_K, 3)], records_expected=5, resamples=20)
    # a and c have 3 samples; b has 2 (short); two records of 5 never succeeded.
    assert (at3.records, at3.skipped) == (2, 3)
    assert at3.value == pytest.approx((pass_at_k(3, 1, 3) + pass_at_k(3, 1, 3)) / 2)
    # no record has 4 samples: the reducer is left out, not reported as 0
    assert reduce_samples(correctness, [(Reducer.PASS_AT_K, 4)], resamples=20) == ()


def test_majority_leaves_out_records_with_a_sample_without_an_answer_key() -> None:
    correctness = SampleCorrectness.of(
        ["a", "a", "b", "b"], [True, True, False, True], ["x", "x", None, "y"]
    )
    (majority,) = reduce_samples(correctness, [(Reducer.MAJORITY, None)], resamples=20)
    assert (majority.value, majority.records, majority.skipped) == (1.0, 1, 1)


def test_samples_without_a_correct_bool_are_not_counted() -> None:
    correctness = SampleCorrectness.of(["a", "a", "a"], [True, None, False])
    (grouped,) = record_samples(correctness)
    assert grouped.correct == (True, False)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.booleans(), st.sampled_from("xyz")), min_size=1, max_size=6),
        min_size=1,
        max_size=25,
    )
)
def test_the_shared_bootstrap_gives_reduce_records_values_and_its_intervals_without_skips(
    rows: list[list[tuple[bool, str]]],
) -> None:
    ids = [str(i) for i, row in enumerate(rows) for _ in row]
    correctness = SampleCorrectness.of(
        ids, [ok for row in rows for ok, _ in row], [a for row in rows for _, a in row]
    )
    records = [
        RecordSamples(str(i), tuple(ok for ok, _ in row), tuple(a for _, a in row))
        for i, row in enumerate(rows)
    ]
    asked = [
        (Reducer.PASS_AT_K, 1),
        (Reducer.PASS_AT_K, 3),
        (Reducer.PASS_HAT_K, 2),
        (Reducer.MAJORITY, None),
        (Reducer.MEAN, None),
    ]
    shared = {m.name: m for m in reduce_samples(correctness, asked, seed=5, resamples=200)}
    for reducer, k in asked:
        try:
            alone = reduce_records(records, reducer, k, seed=5, resamples=200)
        except ValueError:  # no record has k samples: left out
            assert (
                reducer.value if k is None else reducer.value.replace("k", str(k))
            ) not in shared
            continue
        metric = shared[alone.name]
        assert metric.value == pytest.approx(alone.value, abs=1e-12)
        assert (metric.records, metric.skipped) == (alone.records, alone.skipped)
        assert metric.interval.lower <= metric.value <= metric.interval.upper
        if alone.skipped == 0:  # the same draws over the same records (sums in another order)
            assert metric.interval.lower == pytest.approx(alone.interval.lower, abs=1e-12)
            assert metric.interval.upper == pytest.approx(alone.interval.upper, abs=1e-12)
