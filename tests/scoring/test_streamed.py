"""A whole task scored in the worker as its pages arrive: the same report as
``score_task`` over the same samples, without holding the samples."""

import dataclasses
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
    ScoreReport,
    ScoringSample,
    score_task,
)
from evald_server.scoring import _pool as pool
from tests.scoring.test_intervals import BUILDERS

STREAMED = {TaskType.QA, TaskType.GENERATION, TaskType.SUMMARIZATION, TaskType.MULTIPLE_CHOICE}
_MODES = [("exact", "yes"), ("contains", "ye"), ("regex", "^y(es)?$"), ("numeric", "#### 4")]


def _task(task_type: TaskType, rng: random.Random, n: int) -> list[ScoringSample]:
    """``n`` samples as the store gives them: row ids, three repeats of each record
    (adjacent), a skipped sample now and then; for generation every match mode; for
    multiple choice log-probabilities (with and without a letter), records without a
    subject and a skipped one with more choices than any scored one."""
    samples = []
    for i, sample in enumerate(BUILDERS[task_type](rng, n)):
        record = sample.record
        if task_type is TaskType.GENERATION:
            mode, reference = _MODES[i % len(_MODES)]
            record = {**record, "match": mode, "reference": reference}
            output = rng.choice(["yes", "no", "4", "yes 4", "", "YES"])
            sample = dataclasses.replace(sample, output=output)
        if task_type is TaskType.MULTIPLE_CHOICE:
            if i % 5 == 1:
                record = {k: v for k, v in record.items() if k != "metadata"}
            if i % 11 == 5:  # skipped below
                record = {**record, "choices": [*record["choices"], "v", "u"]}
            if i % 4 == 2:
                letter = rng.choice(["A", "B", " C", "zz"])
                sample = dataclasses.replace(sample, top_logprobs=((letter, -0.5), ("D", -1.5)))
        samples.append(
            dataclasses.replace(
                sample,
                subtask_id=str(1000 + i),
                record_id=f"r{i // 3}",
                repeat_index=i % 3,
                record=record,
                output=None if i % 11 == 5 else sample.output,
            )
        )
    return samples


def _pages(samples: list[ScoringSample], sizes: Iterator[int]) -> Iterator[list[ScoringSample]]:
    start = 0
    while start < len(samples):
        size = next(sizes)
        yield samples[start : start + size]
        start += size


def _received(task_type: TaskType, pages: Iterator[list[ScoringSample]], seed: int) -> object:
    job = pool._Job(None, task_type, seed, worst_k=5, resamples=200)
    receiver = pool._receiver(job)
    assert isinstance(receiver, pool._Streamed) == (task_type in STREAMED)
    for page in pages:
        receiver.add(page)
    reply = receiver.reply()
    assert not reply.error_type, reply.traceback
    return reply.result


@pytest.mark.parametrize("task_type", list(TaskType))
@pytest.mark.parametrize("n", [0, 1, 2, 150])
def test_a_task_scored_as_its_pages_come_reports_what_score_task_does(
    task_type: TaskType, n: int
) -> None:
    samples = _task(task_type, random.Random(n), n)
    sizes = iter([1, 0, 13, 50, *[40] * 10])  # an empty page, a one-sample page, uneven
    streamed = _received(task_type, _pages(samples, sizes), seed=n)
    whole = score_task(task_type, samples, seed=n, worst_k=5, resamples=200)
    assert isinstance(streamed, ScoreReport)
    assert streamed == whole
    # repr writes every float exactly (and -0.0 apart from 0.0): bit for bit.
    assert repr(streamed) == repr(whole)


@pytest.mark.parametrize("task_type", sorted(STREAMED))
def test_ties_among_the_worst_keep_the_order_of_the_task(task_type: TaskType) -> None:
    # Many samples share the worst score, across pages: the first ones are reported.
    samples = _task(task_type, random.Random(9), 300)
    streamed = _received(task_type, _pages(samples, iter([7] * 100)), seed=1)
    whole = score_task(task_type, samples, seed=1, worst_k=5, resamples=200)
    assert isinstance(streamed, ScoreReport)
    assert streamed.payload == whole.payload
    assert streamed.payload.worst_examples  # there were worst examples to choose


def _qa_pages(n: int, page_size: int) -> Iterator[EncodedPage]:
    """QA samples in their stored form, each with its own record, built page by page."""
    for start in range(0, n, page_size):
        yield EncodedPage(
            tuple(
                EncodedSample(
                    str(i),
                    f"record-{i:07d}",
                    0,
                    json.dumps(
                        {
                            "question": f"Which colour is the object number {i}?",
                            "answers": [f"colour {i % 97}", f"shade {i % 89}"],
                        }
                    ),
                    f"it is colour {i % 101}",
                )
                for i in range(start, min(n, start + page_size))
            )
        )


def test_a_streamed_task_holds_columns_not_its_samples() -> None:
    """The worker's side of a whole-task job of 20,000 QA samples, fed as the server
    sends them (stored pages, decoded one by one) up to its pickled reply: ~1.1 KB a
    sample at its peak when the samples are kept until the end (``streams`` off), ~0.4
    KB with the scores kept in columns."""
    n = 20_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        decoder = pool.PageDecoder()
        receiver = pool._receiver(pool._Job(None, TaskType.QA, 0, worst_k=5, resamples=5))
        for page in _qa_pages(n, 2000):
            receiver.add(decoder.decode(page))
            del page
        reply = receiver.reply()
        sent = pickle.dumps(reply)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert not reply.error_type, reply.traceback
    assert pickle.loads(sent).result.scored_samples == n
    assert peak < 600 * n, f"{peak / n:.0f} bytes a sample"
