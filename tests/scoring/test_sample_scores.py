"""SampleScores (per-sample scores in columns) and PageDecoder (samples in stored form):
both must give back exactly what they were given."""

import json
import pickle
import random
import tracemalloc
from collections.abc import Iterator

import pytest

from evald_server.domain import TaskType
from evald_server.scoring import (
    EncodedPage,
    EncodedSample,
    PageDecoder,
    SampleScore,
    SampleScores,
    ScoringSample,
    score_task,
)
from tests.scoring.test_intervals import BUILDERS

MIXED = [
    SampleScore("12", {"f1": 0.25, "exact_match": 0.0}, ("no_answer",), False),
    SampleScore("s0-0", {"exact_match": 1.0, "f1": 1.0}, (), True),
    SampleScore("007", {"rouge1": 0.1 + 0.2}, (), None),  # not canonical: stays a string
    SampleScore("-3", {}, ("a", "b"), None),
    SampleScore("9" * 30, {"f1": float("nan"), "tp": 1e-310}, (), True),  # past int64
]


def test_sample_scores_give_back_every_field_exactly() -> None:
    scores = SampleScores(MIXED)
    assert len(scores) == len(MIXED)
    for got, want in zip(scores, MIXED, strict=True):
        assert got.subtask_id == want.subtask_id
        assert list(got.scores) == list(want.scores)  # names, in their order
        assert [repr(v) for v in got.scores.values()] == [repr(v) for v in want.scores.values()]
        assert (got.flags, got.correct) == (want.flags, want.correct)
    assert scores[0] == MIXED[0]
    assert scores[-1].subtask_id == MIXED[-1].subtask_id
    assert scores[1:3] == MIXED[1:3]
    with pytest.raises(IndexError):
        scores[len(MIXED)]


def test_sample_scores_equal_the_list_of_the_same_scores() -> None:
    same = [s for s in MIXED if s.subtask_id != "9" * 30]  # nan != nan
    assert SampleScores(same) == same
    assert SampleScores(same) == tuple(same)
    assert SampleScores(same) != same[:-1]
    assert SampleScores(same) != [*same[:-1], SampleScore("-3", {}, ("a",), None)]
    assert SampleScores() == []
    assert pickle.loads(pickle.dumps(SampleScores(same))) == same
    with pytest.raises(TypeError):
        hash(SampleScores(same))


def test_row_ids_travel_as_integers() -> None:
    rows = [SampleScore(str(i), {"correct": 1.0}, (), True) for i in range(1000)]
    columns = SampleScores(rows)
    assert columns == rows
    assert len(pickle.dumps(columns)) < 0.75 * len(pickle.dumps(rows))
    assert all(type(s.subtask_id) is str for s in columns)


def _unpickled_bytes(data: bytes) -> int:
    tracemalloc.start()
    try:
        loaded = pickle.loads(data)
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del loaded
    return size


def test_flags_travel_as_one_column_whatever_their_share() -> None:
    # A classification task whose every output maps to no label flags every sample (a
    # tuple of its own each, as a scorer builds them): the reply the server unpickles
    # must not hold an object per flagged sample.
    n = 10_000
    flagged = [SampleScore(str(i), {"correct": 0.0}, (f"{'unmapped'}",), False) for i in range(n)]
    plain = [SampleScore(str(i), {"correct": 0.0}, (), False) for i in range(n)]
    flagged_size, plain_size = (
        _unpickled_bytes(pickle.dumps(SampleScores(x))) for x in (flagged, plain)
    )
    assert flagged_size < plain_size + 8 * n  # one int per sample, at most
    assert SampleScores(flagged) == flagged
    mixed = [*plain[:3], *flagged[3:5], SampleScore("5", {}, ("a", "b"), None), plain[6]]
    assert pickle.loads(pickle.dumps(SampleScores(mixed))) == mixed


def test_building_the_columns_allocates_nothing_per_sample_before_it() -> None:
    # The padding of a column first seen at sample i (i zeros) was built for every
    # sample: 16·i bytes allocated and freed per sample, quadratic in the task (27 s for
    # 100,000 samples; a 1,000,000-sample task ran past its scoring budget).
    n = 20_000
    largest = 0

    def rows() -> Iterator[SampleScore]:
        nonlocal largest
        for i in range(n):
            tracemalloc.reset_peak()
            yield SampleScore(
                str(i), {"correct": 1.0, **({"late": 0.5} if i > 3 else {})}, (), True
            )
            current, peak = tracemalloc.get_traced_memory()
            largest = max(largest, peak - current)

    tracemalloc.start()
    try:
        scores = SampleScores(rows())
    finally:
        tracemalloc.stop()
    assert len(scores) == n
    assert scores[2].scores == {"correct": 1.0}
    assert scores[n - 1].scores == {"correct": 1.0, "late": 0.5}
    assert largest < 8 * n  # one sample's work, whatever its index


@pytest.mark.parametrize("task_type", list(TaskType))
def test_a_scorer_reports_its_sample_scores_in_columns(task_type: TaskType) -> None:
    samples = BUILDERS[task_type](random.Random(3), 40)
    report = score_task(task_type, samples, resamples=20)
    assert isinstance(report.sample_scores, SampleScores)
    assert len(report.sample_scores) == report.scored_samples


def test_pages_decode_to_the_samples_they_encode() -> None:
    records = [{"input": f"x{i}", "label": "a", "choices": ["a", "b"]} for i in range(3)]
    texts = [json.dumps(r) for r in records]
    page = EncodedPage(
        tuple(
            EncodedSample(f"{3 * i + k}", f"r{i}", k, texts[i], None if k == 2 else "a")
            for i in range(3)
            for k in range(3)
        )
    )
    decoded = PageDecoder().decode(pickle.loads(pickle.dumps(page)))
    assert decoded == [
        ScoringSample(f"{3 * i + k}", f"r{i}", k, records[i], None if k == 2 else "a")
        for i in range(3)
        for k in range(3)
    ]
    # The repeats of a record share one decoded record; equal small values are shared.
    assert decoded[0].record is decoded[2].record
    assert decoded[0].record["choices"] is decoded[3].record["choices"]
    with pytest.raises(ValueError, match="'r9' is not a JSON object"):
        PageDecoder().decode(EncodedPage((EncodedSample("1", "r9", 0, "[1]", "a"),)))
