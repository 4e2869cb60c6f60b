"""Summarization against rouge-score's own RougeScorer (default tokenizer, stemming)."""

import random

import pytest
from rouge_score import rouge_scorer

from evald_server.domain import TaskType
from evald_server.scoring import SummarizationPayload, score_task
from tests.scoring._factories import samples_of

TOL = 1e-12
TYPES = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
NAMES = {"rouge1": "rouge1", "rouge2": "rouge2", "rougeL": "rouge_l", "rougeLsum": "rouge_lsum"}
VOCAB = ["The", "cats", "cat", "running", "runs", "ran", "quickly", "over", "the", "fences"]
VOCAB += ["fence,", "42", "3.5", "généralement", "won't", "--", "a", "is", "was", "studies"]


def _text(rng: random.Random, low: int) -> str:
    words = [rng.choice(VOCAB) for _ in range(rng.randint(low, 30))]
    # Sentences on separate lines, sometimes: what rougeLsum reads as sentences.
    for i in range(len(words) - 1, 0, -1):
        roll = rng.random()
        if roll < 0.1:
            words.insert(i, "\n")
        elif roll < 0.15:
            words.insert(i, ".")
    return " ".join(words)


@pytest.fixture(scope="module")
def reference() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(TYPES, use_stemmer=True)


@pytest.mark.parametrize("seed", range(200))
def test_agrees_with_rouge_score(seed: int, reference: rouge_scorer.RougeScorer) -> None:
    rng = random.Random(seed)
    pairs = []
    for _ in range(rng.randint(1, 8)):
        summary = _text(rng, 1)
        output = rng.choice([_text(rng, 0), summary, summary.upper(), ""])
        pairs.append(({"document": "d", "summary": summary}, output))
    report = score_task(TaskType.SUMMARIZATION, samples_of(pairs), resamples=10)
    expected = [reference.score(record["summary"], output) for record, output in pairs]
    for row, scores in zip(report.sample_scores, expected, strict=True):
        for rouge_type in TYPES:
            assert row.scores[NAMES[rouge_type]] == pytest.approx(
                scores[rouge_type].fmeasure, abs=TOL
            )
    payload = report.payload
    assert isinstance(payload, SummarizationPayload)
    assert payload.stemming is True
    for aggregate in payload.rouge:
        values = [scores[aggregate.rouge_type] for scores in expected]
        n = len(values)
        assert aggregate.precision == pytest.approx(sum(v.precision for v in values) / n, abs=TOL)
        assert aggregate.recall == pytest.approx(sum(v.recall for v in values) / n, abs=TOL)
        assert aggregate.fmeasure == pytest.approx(sum(v.fmeasure for v in values) / n, abs=TOL)
        assert report.metrics[NAMES[aggregate.rouge_type]] == aggregate.fmeasure


def _metrics(summary: str, output: str) -> dict[str, float]:
    pairs = [({"document": "d", "summary": summary}, output)]
    return score_task(TaskType.SUMMARIZATION, samples_of(pairs), resamples=10).metrics


def test_rouge_lsum_reads_newlines_as_sentences() -> None:
    # Sentence by sentence, both gold sentences are found whole (summary-level LCS)...
    lines = _metrics("the cat sat\nthe dog ran", "the dog ran the cat sat")
    assert lines["rouge_lsum"] == 1.0
    assert lines["rouge_l"] == 0.5  # ...while one LCS over the whole text finds 3 of 6.
    # Without newlines there is one sentence and rougeLsum is rougeL.
    one_line = _metrics("the cat sat. the dog ran", "the dog ran the cat sat")
    assert one_line["rouge_lsum"] == one_line["rouge_l"] == 0.5
