"""A sample its scorer raises on is left out of its job, not its whole task: found by
bisection, in the pool's real worker processes, for whole tasks (gathered and
streamed), pages and aggregations; a broken scorer still fails the task."""

from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import pytest

from evald_server.domain import ErrorReason, TaskType
from evald_server.scoring import ScoringFailure, ScoringPool, ScoringSample, score_task
from evald_server.scoring._isolation import MAX_UNSCORABLE_SHARE, without_unscorable
from tests.scoring._pool_scorers import (
    ClassificationBreakingOnBoom,
    QaBreakingOnBoom,
    QaBreakingOnItsExample,
)


def _sample(i: int, output: str | None, **record: Any) -> ScoringSample:
    return ScoringSample(str(i), f"r{i}", 0, record, output)


class _Counted:
    """Scores a list by summing it; raises on the values in ``bad``; counts calls."""

    def __init__(self, bad: set[int]) -> None:
        self.bad = bad
        self.calls = 0

    def __call__(self, samples: Sequence[ScoringSample]) -> int:
        self.calls += 1
        hits = [s for s in samples if int(s.subtask_id) in self.bad]
        if hits:
            raise ValueError(f"bad sample {hits[0].subtask_id}")
        return len(samples)


def _numbered(n: int) -> list[ScoringSample]:
    return [_sample(i, f"out {i}") for i in range(n)]


def test_a_job_that_does_not_raise_is_done_once() -> None:
    job = _Counted(set())
    assert without_unscorable(_numbered(50), job) == (50, ())
    assert job.calls == 1


@pytest.mark.parametrize("bad", [{0}, {49}, {17}, {3, 40}, {10, 11, 12}])
def test_the_samples_that_raise_alone_are_left_out_and_named(bad: set[int]) -> None:
    job = _Counted(bad)
    result, unscorable = without_unscorable(_numbered(50), job)
    assert result == 50 - len(bad)
    assert [u.subtask_id for u in unscorable] == [str(i) for i in sorted(bad)]
    assert [u.record_id for u in unscorable] == [f"r{i}" for i in sorted(bad)]
    assert all(u.error == f"ValueError: bad sample {u.subtask_id}" for u in unscorable)
    # Bisection: about log2(50) probes a bad sample, far from one per sample.
    assert job.calls <= 2 + len(bad) * 2 * 7


def test_the_probe_may_be_cheaper_than_the_job() -> None:
    job, probe = _Counted({5}), _Counted({5})
    assert without_unscorable(_numbered(20), job, probe)[0] == 19
    assert job.calls == 2  # once failing, once without the sample
    assert probe.calls > 1


def test_more_bad_samples_than_the_share_fail_the_job_with_its_own_error() -> None:
    assert MAX_UNSCORABLE_SHARE == 0.1
    within = set(range(0, 100, 10))  # 10 of 100: at the share
    assert len(without_unscorable(_numbered(100), _Counted(within))[1]) == 10
    beyond = set(range(0, 100, 9))  # 12 of 100
    with pytest.raises(ValueError, match="bad sample 0"):
        without_unscorable(_numbered(100), _Counted(beyond))
    # A small job may lose one sample, never all of them.
    assert len(without_unscorable(_numbered(3), _Counted({1}))[1]) == 1
    with pytest.raises(ValueError, match="bad sample 0"):
        without_unscorable(_numbered(1), _Counted({0}))


def test_a_failure_no_sample_causes_alone_fails_the_job() -> None:
    def pairs(samples: Sequence[ScoringSample]) -> int:
        ids = {s.subtask_id for s in samples}
        if {"3", "4"} <= ids:
            raise RuntimeError("3 and 4 together")
        return len(samples)

    with pytest.raises(RuntimeError, match="together"):
        without_unscorable(_numbered(8), pairs)


def test_a_job_that_still_raises_without_them_fails() -> None:
    calls = iter([ValueError("first"), ValueError("again")])

    def job(samples: Sequence[ScoringSample]) -> int:
        if len(samples) in (8, 7):
            raise next(calls)
        return len(samples)

    def probe(samples: Sequence[ScoringSample]) -> None:
        if any(s.subtask_id == "2" for s in samples):
            raise ValueError("2")

    with pytest.raises(ValueError, match="again"):
        without_unscorable(_numbered(8), job, probe)


def test_long_errors_are_cut() -> None:
    def job(samples: Sequence[ScoringSample]) -> int:
        if any(s.subtask_id == "1" for s in samples):
            raise KeyError("x" * 1000)
        return len(samples)

    (unscorable,) = without_unscorable(_numbered(4), job)[1]
    assert unscorable.error.startswith("KeyError: 'xxx")
    assert len(unscorable.error) <= len("KeyError: ") + 200


@pytest.fixture(scope="module")
def pool() -> Iterator[ScoringPool]:
    scoring_pool = ScoringPool(
        1,
        scorers={
            TaskType.CLASSIFICATION: ClassificationBreakingOnBoom(),
            TaskType.QA: QaBreakingOnBoom(),
        },
        resamples=50,
    )
    yield scoring_pool
    scoring_pool.close()


def _classified(n: int, boom: set[int]) -> list[ScoringSample]:
    return [
        _sample(i, "BOOM" if i in boom else ("pos" if i % 2 else "neg"), label="pos", input="x")
        for i in range(n)
    ]


def _qa(n: int, boom: set[int]) -> list[ScoringSample]:
    return [
        _sample(i, "BOOM" if i in boom else f"it is {i}", question="q", answers=[f"it is {i}"])
        for i in range(n)
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("task_type", "build"), [(TaskType.CLASSIFICATION, _classified), (TaskType.QA, _qa)]
)
async def test_a_whole_task_is_scored_without_its_unscorable_samples(
    pool: ScoringPool, task_type: TaskType, build: Any
) -> None:
    samples = build(60, {7, 33})
    with anyio.fail_after(60):
        report = await pool.score(task_type, samples, seed=3, timeout_s=60)
    assert [u.record_id for u in report.unscorable] == ["r7", "r33"]
    assert all("cannot read the answer of" in u.error for u in report.unscorable)
    kept = [s for s in samples if s.record_id not in ("r7", "r33")]
    expected = score_task(task_type, kept, seed=3, resamples=50)
    assert (report.metrics, report.scored_samples) == (expected.metrics, 58)
    assert {s.subtask_id for s in report.sample_scores} == {s.subtask_id for s in kept}


@pytest.mark.anyio
async def test_pages_and_their_aggregation_leave_out_their_unscorable_samples(
    pool: ScoringPool,
) -> None:
    samples = _classified(90, {5, 70, 88})
    with anyio.fail_after(60):
        first = await pool.score_page(
            TaskType.CLASSIFICATION, samples[:40], context=(), timeout_s=60
        )
        second = await pool.score_page(
            TaskType.CLASSIFICATION, samples[40:80], context=first.context, timeout_s=60
        )
        report = await pool.aggregate(
            TaskType.CLASSIFICATION, [first, second], samples[80:], seed=3, timeout_s=60
        )
    assert [u.record_id for u in first.unscorable] == ["r5"]
    assert [u.record_id for u in second.unscorable] == ["r70"]
    assert report is not None
    assert [u.record_id for u in report.unscorable] == ["r5", "r70", "r88"]
    assert report.scored_samples == 87


@pytest.mark.anyio
async def test_a_scorer_that_raises_on_every_sample_still_fails_the_task(
    pool: ScoringPool,
) -> None:
    with anyio.fail_after(60), pytest.raises(ScoringFailure) as failed:
        await pool.score(TaskType.QA, _qa(20, set(range(20))), seed=0, timeout_s=60)
    assert failed.value.reason is ErrorReason.SCORER_FAILED


@pytest.mark.anyio
async def test_a_streamed_page_that_raises_late_leaves_the_task_as_it_was() -> None:
    # The page is measured, then its worst example raises: nothing of it may stay.
    samples = [
        _sample(i, "wrong", question="q", answers=[f"it is {i}"], boom=i == 4) for i in range(10)
    ]
    pool = ScoringPool(1, scorers={TaskType.QA: QaBreakingOnItsExample()}, resamples=50)
    try:
        with anyio.fail_after(60):
            report = await pool.score(TaskType.QA, samples, seed=1, timeout_s=60)
    finally:
        pool.close()
    assert [u.record_id for u in report.unscorable] == ["r4"]
    kept = [s for s in samples if s.record_id != "r4"]
    expected = score_task(TaskType.QA, kept, seed=1, resamples=50)
    assert (report.metrics, report.scored_samples, report.payload) == (
        expected.metrics,
        9,
        expected.payload,
    )
