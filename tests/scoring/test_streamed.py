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

STREAMED = {
    TaskType.QA,
    TaskType.GENERATION,
    TaskType.SUMMARIZATION,
    TaskType.MULTIPLE_CHOICE,
    TaskType.TOOL_CALL,
    TaskType.STRUCTURED_OUTPUT,
}
_MODES = [("exact", "yes"), ("contains", "ye"), ("regex", "^y(es)?$"), ("numeric", "#### 4")]


def _task(task_type: TaskType, rng: random.Random, n: int) -> list[ScoringSample]:
    """``n`` samples as the store gives them: row ids, three repeats of each record
    (adjacent), a skipped sample now and then; for generation every match mode; for
    multiple choice log-probabilities (with and without a letter), records without a
    subject and a skipped one with more choices than any scored one; for classification
    records with their own choices, unmapped outputs, rendered prompts, inputs longer
    than a worst example shows and skipped records whose label and choice only they
    bring to the label set."""
    samples = []
    for i, sample in enumerate(BUILDERS[task_type](rng, n)):
        record = sample.record
        if task_type is TaskType.GENERATION:
            mode, reference = _MODES[i % len(_MODES)]
            record = {**record, "match": mode, "reference": reference}
            output = rng.choice(["yes", "no", "4", "yes 4", "", "YES"])
            sample = dataclasses.replace(sample, output=output)
        if task_type is TaskType.CLASSIFICATION:
            if i % 7 == 3:  # the record's own choices, answered by letter or by text
                record = {**record, "choices": ["e", "f", record["label"]]}
                sample = dataclasses.replace(sample, output=rng.choice(["B", "f", "C", "zz"]))
            if i % 6 == 4:  # a rendered prompt; else the record's input, long now and then
                sample = dataclasses.replace(sample, input_text=f"Classify: {i}")
            elif i % 9 == 2:
                record = {**record, "input": "long " * 150}
            if i % 11 == 5:  # skipped below, with a label no scored sample has
                record = {**record, "label": "skipped-only", "choices": ["a", "g"]}
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


@pytest.mark.parametrize("task_type", sorted(STREAMED | {TaskType.CLASSIFICATION}))
def test_ties_among_the_worst_keep_the_order_of_the_task(task_type: TaskType) -> None:
    # Many samples share the worst score, across pages: the first ones are reported.
    samples = _task(task_type, random.Random(9), 300)
    streamed = _received(task_type, _pages(samples, iter([7] * 100)), seed=1)
    whole = score_task(task_type, samples, seed=1, worst_k=5, resamples=200)
    assert isinstance(streamed, ScoreReport)
    assert streamed.payload == whole.payload
    assert streamed.payload.worst_examples  # there were worst examples to choose


def test_a_classification_tasks_worst_are_its_first_wrong_samples_of_one_output() -> None:
    # Every sample gives the same wrong output for the same label: the five worst are
    # the first five samples, each shown with its own input.
    samples = [
        ScoringSample(str(i), f"r{i}", 0, {"input": f"text {i}", "label": "a"}, "b")
        for i in range(40)
    ]
    samples.append(ScoringSample("40", "r40", 0, {"input": "x", "label": "b"}, None))
    streamed = _received(TaskType.CLASSIFICATION, _pages(samples, iter([3] * 20)), seed=2)
    whole = score_task(TaskType.CLASSIFICATION, samples, seed=2, worst_k=5, resamples=200)
    assert isinstance(streamed, ScoreReport)
    assert repr(streamed) == repr(whole)
    assert [e.input for e in streamed.payload.worst_examples] == [f"text {i}" for i in range(5)]


def _stored_pages(task_type: TaskType, n: int, page_size: int) -> Iterator[EncodedPage]:
    """QA or classification samples in their stored form, each with its own record,
    built page by page."""
    for start in range(0, n, page_size):
        yield EncodedPage(
            tuple(
                EncodedSample(str(i), f"record-{i:07d}", 0, *_stored(task_type, i))
                for i in range(start, min(n, start + page_size))
            )
        )


def _stored(task_type: TaskType, i: int) -> tuple[str, str]:
    """A record as JSON text and an output."""
    if task_type is TaskType.QA:
        record = {
            "question": f"Which colour is the object number {i}?",
            "answers": [f"colour {i % 97}", f"shade {i % 89}"],
        }
        return json.dumps(record), f"it is colour {i % 101}"
    review = f"Review {i}: the plot was slow but the acting held it together, mostly. " * 3
    labels = ("negative", "neutral", "positive")
    record = {"input": review, "label": labels[i % 3], "source": f"site {i % 13}"}
    return json.dumps(record), labels[i % 5 % 3] if i % 7 else "not sure"


def _peak_per_sample(task_type: TaskType, n: int) -> float:
    """Traced peak, in bytes a sample, of the worker's side of a whole-task job of ``n``
    samples fed as the server sends them (stored pages, decoded one by one) up to its
    pickled reply."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        decoder = pool.PageDecoder()
        receiver = pool._receiver(pool._Job(None, task_type, 0, worst_k=5, resamples=5))
        for page in _stored_pages(task_type, n, 2000):
            receiver.add(decoder.decode(page))
            del page
        reply = receiver.reply()
        sent = pickle.dumps(reply)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert not reply.error_type, reply.traceback
    assert pickle.loads(sent).result.scored_samples == n
    return peak / n


def test_a_streamed_task_holds_columns_not_its_samples() -> None:
    """20,000 QA samples: ~1.1 KB a sample at the peak when the samples are kept until
    the end (``streams`` off), ~0.4 KB with the scores kept in columns."""
    peak = _peak_per_sample(TaskType.QA, 20_000)
    assert peak < 600, f"{peak:.0f} bytes a sample"


def test_a_whole_classification_task_holds_compact_samples_not_records() -> None:
    """20,000 classification samples (a 216-character review in each record): ~970
    bytes a sample at the peak with the decoded records kept until the end (no
    ``compactor``), ~490 with each sample reduced to its label, choices, output, ids
    and, for the few that could be worst examples, its input."""
    peak = _peak_per_sample(TaskType.CLASSIFICATION, 20_000)
    assert peak < 700, f"{peak:.0f} bytes a sample"
