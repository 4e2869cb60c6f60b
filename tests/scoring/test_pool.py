"""ScoringPool: off the event loop, failures and timeouts as ScoringFailure, and a
pool that keeps working after a worker is killed."""

import json
import logging
import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from evald_server.domain import ErrorCategory, ErrorReason, TaskType
from evald_server.scoring import (
    EncodedPage,
    EncodedSample,
    SampleScores,
    ScoringFailure,
    ScoringPool,
    ScoringSample,
    score_task,
)
from tests.scoring._factories import samples_of
from tests.scoring._pool_scorers import RaisingScorer, SleepingScorer, WaitingScorer
from tests.scoring.test_intervals import BUILDERS
from tests.scoring.test_scored_pages import _samples


@pytest.fixture(scope="module")
def pool() -> Iterator[ScoringPool]:
    # One worker slot: a stuck worker would block every later test of this module.
    scoring_pool = ScoringPool(
        1,
        scorers={
            TaskType.SUMMARIZATION: SleepingScorer(),
            TaskType.NER: RaisingScorer(),
            TaskType.GENERATION: WaitingScorer(),
        },
    )
    yield scoring_pool
    scoring_pool.close()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def _works(pool: ScoringPool) -> None:
    samples = BUILDERS[TaskType.CLASSIFICATION](random.Random(1), 50)
    report = await pool.score(TaskType.CLASSIFICATION, samples, seed=7, timeout_s=60)
    assert report == score_task(TaskType.CLASSIFICATION, samples, seed=7)


@pytest.mark.anyio
async def test_scores_like_score_task(pool: ScoringPool) -> None:
    await _works(pool)


@pytest.mark.anyio
async def test_scores_in_a_worker_process_while_the_loop_runs(
    pool: ScoringPool, tmp_path: Path
) -> None:
    go_file = tmp_path / "go"
    record = {"input": "q", "reference": "yes", "go_file": str(go_file)}
    results = []

    async def score() -> None:
        results.append(
            await pool.score(
                TaskType.GENERATION, samples_of([(record, "yes")]), seed=0, timeout_s=60
            )
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(score)
        await anyio.sleep(0.1)
        go_file.write_text("go")  # runs only if the scoring job left the loop free
    assert results[0].metrics["saw_go_file"] == 1.0
    assert results[0].metrics["pid"] != os.getpid()


@pytest.mark.anyio
async def test_a_raising_scorer_is_scorer_failed(
    pool: ScoringPool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="evald_server.scoring")
    samples = samples_of([({"text": "t", "entities": []}, "[]")])
    with pytest.raises(ScoringFailure) as caught:
        await pool.score(TaskType.NER, samples, seed=0, timeout_s=60)
    failure = caught.value
    assert failure.reason is ErrorReason.SCORER_FAILED
    assert failure.error.category is ErrorCategory.EVAL_OPERATOR_ERROR
    assert str(failure) == "scorer raising@0.0.1 failed with ValueError (details in the server log)"
    assert failure.error.metadata == {"scorer": "raising@0.0.1"}
    # The traceback (and the data in the message) goes to the log, not to clients.
    assert "secret sample text" in caplog.text
    assert "Traceback" in caplog.text
    await _works(pool)


@pytest.mark.anyio
async def test_a_real_scorer_on_a_broken_record_is_scorer_failed(pool: ScoringPool) -> None:
    with pytest.raises(ScoringFailure) as caught:
        await pool.score(TaskType.QA, samples_of([({"question": "q"}, "x")]), seed=0, timeout_s=60)
    assert caught.value.reason is ErrorReason.SCORER_FAILED
    assert str(caught.value) == "scorer qa@1.0.0 failed with KeyError (details in the server log)"


@pytest.mark.anyio
async def test_a_timeout_kills_the_worker_and_the_pool_goes_on(
    pool: ScoringPool, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    samples = samples_of([({"document": "d", "summary": "s", "pid_file": str(pid_file)}, "x")])
    with pytest.raises(ScoringFailure) as caught:
        await pool.score(TaskType.SUMMARIZATION, samples, seed=0, timeout_s=1.0)
    assert caught.value.reason is ErrorReason.SCORER_TIMEOUT
    assert str(caught.value) == "scorer sleeping@0.0.1 ran past its time budget of 1 s"
    assert _gone(int(pid_file.read_text()))
    await _works(pool)  # the only slot is free again, on a fresh worker


@pytest.mark.anyio
async def test_a_cancelled_job_kills_its_worker(pool: ScoringPool, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    samples = samples_of([({"document": "d", "summary": "s", "pid_file": str(pid_file)}, "x")])
    with anyio.move_on_after(1.0):
        await pool.score(TaskType.SUMMARIZATION, samples, seed=0, timeout_s=60)
    assert _gone(int(pid_file.read_text()))
    await _works(pool)


@pytest.mark.anyio
async def test_a_closed_pool_refuses_work() -> None:
    closed = ScoringPool(1)
    await _works(closed)
    closed.close()
    with pytest.raises(RuntimeError, match="closed"):
        await _works(closed)


@pytest.mark.anyio
async def test_a_worker_that_died_while_idle_is_replaced(pool: ScoringPool, tmp_path: Path) -> None:
    go_file = tmp_path / "go"
    go_file.write_text("go")
    record = {"input": "q", "reference": "yes", "go_file": str(go_file)}
    samples = samples_of([(record, "yes")])
    report = await pool.score(TaskType.GENERATION, samples, seed=0, timeout_s=60)
    pid = int(report.metrics["pid"])
    os.kill(pid, signal.SIGKILL)  # the idle worker dies (as under the OOM killer)
    # Until it has exited (SIGKILL cannot be ignored), without reaping it.
    await anyio.to_thread.run_sync(os.waitid, os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    again = await pool.score(TaskType.GENERATION, samples, seed=0, timeout_s=60)
    assert int(again.metrics["pid"]) != pid


class _Source:
    """A SampleSource over pages built here; ``fail_at`` raises instead of that page."""

    def __init__(
        self, pages: list[EncodedPage], *, fail_at: int = -1, pause_s: float = 0.0
    ) -> None:
        self._pages = iter(enumerate(pages))
        self._fail_at = fail_at
        self._pause_s = pause_s

    def __aiter__(self) -> "_Source":
        return self

    async def __anext__(self) -> EncodedPage:
        await anyio.sleep(self._pause_s)
        index, page = next(self._pages, (-1, None))
        if page is None:
            raise StopAsyncIteration
        if index == self._fail_at:
            raise OSError("the store went away")
        return page


def _encoded(samples: list[ScoringSample], page_size: int) -> list[EncodedPage]:
    encoded = [
        EncodedSample(s.subtask_id, s.record_id, s.repeat_index, json.dumps(s.record), s.output)
        for s in samples
    ]
    return [
        EncodedPage(tuple(encoded[i : i + page_size])) for i in range(0, len(encoded), page_size)
    ]


@pytest.mark.anyio
async def test_a_source_is_scored_like_the_samples_it_pages(pool: ScoringPool) -> None:
    samples = BUILDERS[TaskType.QA](random.Random(2), 300)
    source = _Source(_encoded(samples, 70))  # five pages, the last one short
    report = await pool.score(TaskType.QA, source, seed=4, timeout_s=60)
    assert report == score_task(TaskType.QA, samples, seed=4)
    assert isinstance(report.sample_scores, SampleScores)


@pytest.mark.anyio
async def test_samples_in_memory_travel_in_several_messages(pool: ScoringPool) -> None:
    samples = BUILDERS[TaskType.CLASSIFICATION](random.Random(5), 4500)
    report = await pool.score(TaskType.CLASSIFICATION, samples, seed=1, timeout_s=120)
    assert report == score_task(TaskType.CLASSIFICATION, samples, seed=1)


@pytest.mark.anyio
async def test_a_failing_source_raises_its_own_error_and_the_pool_goes_on(
    pool: ScoringPool,
) -> None:
    samples = BUILDERS[TaskType.QA](random.Random(2), 30)
    with pytest.raises(OSError, match="the store went away"):
        await pool.score(
            TaskType.QA, _Source(_encoded(samples, 10), fail_at=1), seed=0, timeout_s=60
        )
    await _works(pool)  # the half-sent job's worker was replaced


@pytest.mark.anyio
async def test_a_page_that_cannot_be_decoded_is_scorer_failed(
    pool: ScoringPool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="evald_server.scoring")
    (page,) = _encoded(BUILDERS[TaskType.QA](random.Random(2), 3), 10)
    broken = EncodedPage((*page.samples, EncodedSample("9", "r9", 0, "{not json", "x")))
    with pytest.raises(ScoringFailure) as caught:
        await pool.score(TaskType.QA, _Source([broken, page]), seed=0, timeout_s=60)
    assert caught.value.reason is ErrorReason.SCORER_FAILED
    assert (
        str(caught.value)
        == "scorer qa@1.0.0 failed with JSONDecodeError (details in the server log)"
    )
    await _works(pool)


@pytest.mark.anyio
async def test_waiting_for_the_source_is_not_the_scorers_time(pool: ScoringPool) -> None:
    samples = BUILDERS[TaskType.QA](random.Random(2), 30)
    # Three pages 1 s apart under a 2 s budget: only sending and scoring count.
    source = _Source(_encoded(samples, 10), pause_s=1.0)
    report = await pool.score(TaskType.QA, source, seed=0, timeout_s=2.0)
    assert report == score_task(TaskType.QA, samples, seed=0)


@pytest.mark.anyio
async def test_pages_scored_in_workers_aggregate_to_the_whole_task_report(
    pool: ScoringPool,
) -> None:

    samples = _samples(900, repeats=2)
    committed = samples[:]
    random.Random(5).shuffle(committed)
    assert pool.scores_pages(TaskType.CLASSIFICATION)
    assert not pool.scores_pages(TaskType.SUMMARIZATION)
    with anyio.fail_after(60):
        whole = await pool.score(TaskType.CLASSIFICATION, samples, seed=4, timeout_s=30)
        first = await pool.score_page(
            TaskType.CLASSIFICATION, committed[:700], context=(), timeout_s=30
        )
        second = await pool.score_page(
            TaskType.CLASSIFICATION, committed[700:1400], context=first.context, timeout_s=30
        )
        paged = await pool.aggregate(
            TaskType.CLASSIFICATION, [first, second], committed[1400:], seed=4, timeout_s=30
        )
    assert paged is not None
    assert (paged.metrics, paged.uncertainty, paged.payload, paged.repeat) == (
        whole.metrics,
        whole.uncertainty,
        whole.payload,
        whole.repeat,
    )
    assert sorted(paged.sample_scores, key=lambda s: int(s.subtask_id)) == list(whole.sample_scores)
