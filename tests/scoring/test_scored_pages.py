"""Page-by-page scoring: pages scored as they commit, in any order, then aggregated,
give the report the whole-task path gives, for classification and for every scorer
whose samples score on their own (metrics, intervals, payload, worst examples,
repeats and per-sample scores); a label that appears only in a later page makes the
aggregation decline, so the caller scores the whole task."""

import random

import pytest

from evald_server.domain import TaskType
from evald_server.scoring import ScoreReport, ScoringSample, scorer_for
from tests.scoring.test_streamed import STREAMED, _task

LABELS = ("negative", "neutral", "positive")


def _samples(n: int, *, repeats: int = 1, seed: int = 7) -> list[ScoringSample]:
    rng = random.Random(seed)
    samples = []
    row_id = 0
    for index in range(n):
        gold = rng.choice(LABELS)
        record = {"input": f"text {index}", "label": gold}
        for repeat in range(repeats):
            row_id += 1 + rng.randrange(3)  # row ids with gaps, as failed subtasks leave
            roll = rng.random()
            output = gold if roll < 0.6 else rng.choice(LABELS) if roll < 0.9 else "no idea"
            samples.append(
                ScoringSample(str(row_id), f"rec-{index}", repeat, record, f"It is {output}.")
            )
    return samples


def _by_pages(samples: list[ScoringSample], page: int, *, seed: int = 3):  # type: ignore[no-untyped-def]
    """Score in commit order (shuffled), page by page, as the engine feeds them."""
    scorer = scorer_for(TaskType.CLASSIFICATION)
    committed = samples[:]
    random.Random(seed).shuffle(committed)
    context: tuple[str, ...] = ()
    pages = []
    for start in range(0, len(committed), page):
        scored = scorer.score_page(committed[start : start + page], context=context, worst_k=5)
        context = scored.context
        pages.append(scored)
    return scorer.aggregate(pages, seed=11, worst_k=5, resamples=200)


def _assert_same_report(paged: ScoreReport | None, whole: ScoreReport) -> None:
    assert paged is not None
    assert paged.metrics == whole.metrics
    assert paged.uncertainty == whole.uncertainty
    assert paged.payload == whole.payload
    assert paged.repeat == whole.repeat
    assert (paged.scored_samples, paged.skipped_samples) == (
        whole.scored_samples,
        whole.skipped_samples,
    )
    by_id = {s.subtask_id: s for s in whole.sample_scores}
    assert len(paged.sample_scores) == len(by_id)
    assert all(by_id[s.subtask_id] == s for s in paged.sample_scores)


@pytest.mark.parametrize(("n", "repeats", "page"), [(600, 1, 128), (250, 3, 100), (40, 1, 1000)])
def test_pages_aggregate_to_the_whole_task_report(n: int, repeats: int, page: int) -> None:
    samples = _samples(n, repeats=repeats)
    whole = scorer_for(TaskType.CLASSIFICATION).score(samples, seed=11, worst_k=5, resamples=200)
    _assert_same_report(_by_pages(samples, page), whole)


PAGED = sorted(t for t in STREAMED if scorer_for(t).pages)


def test_the_scorers_that_score_page_by_page() -> None:
    assert PAGED == [
        TaskType.GENERATION,
        TaskType.MULTIPLE_CHOICE,
        TaskType.QA,
        TaskType.STRUCTURED_OUTPUT,
        TaskType.TOOL_CALL,
    ]


@pytest.mark.parametrize("task_type", PAGED)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_streamed_scorers_pages_in_commit_order_aggregate_to_the_whole_task_report(
    task_type: TaskType, seed: int
) -> None:
    """Every scorer whose samples score on their own scores page by page too: pages of
    random sizes, in a shuffled (commit) order, with skipped samples and repeats, give
    the report of the whole task (columns over the scored samples are put back in row
    id order, columns over every sample are read in any order)."""
    rng = random.Random(seed)
    samples = _task(task_type, rng, 240)
    scorer = scorer_for(task_type)
    assert scorer.pages
    whole = scorer.score(samples, seed=5, worst_k=4, resamples=150)
    committed = samples[:]
    rng.shuffle(committed)
    pages, start = [], 0
    while start < len(committed):
        size = rng.randint(1, 70)
        pages.append(scorer.score_page(committed[start : start + size], context=(), worst_k=4))
        start += size
    _assert_same_report(scorer.aggregate(pages, seed=5, worst_k=4, resamples=150), whole)


def test_a_label_first_seen_in_a_later_page_declines_the_aggregation() -> None:
    samples = _samples(300)
    late = ScoringSample("100000", "rec-late", 0, {"input": "x", "label": "mixed"}, "mixed")
    scorer = scorer_for(TaskType.CLASSIFICATION)
    first = scorer.score_page(samples, context=(), worst_k=5)
    second = scorer.score_page([late], context=first.context, worst_k=5)
    assert second.context == tuple(sorted((*LABELS, "mixed")))
    assert scorer.aggregate([first, second], seed=1, worst_k=5, resamples=50) is None
    # The same label in the first page: the pages agree and aggregate.
    first = scorer.score_page([late, *samples], context=(), worst_k=5)
    assert scorer.aggregate([first], seed=1, worst_k=5, resamples=50) is not None


def test_scorers_that_cannot_score_pages_say_so() -> None:
    for task_type in TaskType:
        scorer = scorer_for(task_type)
        if not scorer.pages:
            with pytest.raises(NotImplementedError):
                scorer.score_page([], context=(), worst_k=5)
    assert scorer_for(TaskType.CLASSIFICATION).pages
    assert not scorer_for(TaskType.NER).pages  # its metrics count entities over the task
    assert not scorer_for(TaskType.SUMMARIZATION).pages  # its documents, see the scorer
