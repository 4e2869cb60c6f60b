"""Summarization: ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum by rouge-score.

``rouge_score.rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"],
use_stemmer=True)`` scores (gold ``summary``, output) for each sample; the payload's
precision / recall / F are means over samples and the headline metrics ``rouge1``,
``rouge2``, ``rouge_l``, ``rouge_lsum`` are the mean F-measures.

Texts are passed as they are. rouge-score treats ``\\n`` as the sentence boundary for
rougeLsum (summary-level LCS over newline-separated sentences) and does not split
sentences itself (``split_summaries=False``, no NLTK data needed); a summary written
on one line therefore has rougeLsum = rougeL. Write one sentence per line in the
dataset (and ask for it in the prompt) to get the summary-level score.

The tokenizer is rouge-score's own ``tokenize.tokenize`` with NLTK's Porter stemmer,
exactly as ``DefaultTokenizer(use_stemmer=True)``, with the stems memoised (stemming
is most of the cost); identical (summary, output) pairs are scored once.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.domain import TaskType
from evald_server.scoring._common import BaseScorer, Evaluation, Row
from evald_server.scoring._intervals import FloatArray
from evald_server.scoring._payloads import RougeScore, SummarizationPayload, WorstExample
from evald_server.scoring._types import ScoringSample

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")
METRIC_NAMES = {
    "rouge1": "rouge1",
    "rouge2": "rouge2",
    "rougeL": "rouge_l",
    "rougeLsum": "rouge_lsum",
}
_MAX_MEMO = 500_000  # distinct words whose stems are kept


class _MemoStemmer:
    def __init__(self, stemmer: Any) -> None:
        self._stemmer = stemmer
        self._stems: dict[str, str] = {}

    def stem(self, word: str) -> str:
        stem = self._stems.get(word)
        if stem is None:
            if len(self._stems) >= _MAX_MEMO:
                self._stems.clear()
            stem = self._stems[word] = self._stemmer.stem(word)
        return stem


class _StemmingTokenizer:
    """rouge-score's tokenizer protocol: ``tokenize(text) -> list[str]``."""

    def __init__(self, tokenize: Callable[[str, Any], list[str]], stemmer: Any) -> None:
        self._tokenize = tokenize
        self._stemmer = _MemoStemmer(stemmer)

    def tokenize(self, text: str) -> list[str]:
        return self._tokenize(text, self._stemmer)


def new_rouge_scorer() -> Any:
    """rouge-score's RougeScorer with the memoising tokenizer."""
    # Imported here: rouge-score pulls in all of NLTK (~2 s), which only a
    # summarization task needs; other workers and the server start without it.
    from nltk.stem import porter
    from rouge_score import rouge_scorer, tokenize

    tokenizer = _StemmingTokenizer(tokenize.tokenize, porter.PorterStemmer())
    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True, tokenizer=tokenizer)


class SummarizationScorer(BaseScorer):
    name = "summarization"
    version = "1.0.0"
    task_type = TaskType.SUMMARIZATION
    primary_metric = "rouge_l"
    libraries = ("numpy", "rouge-score", "nltk")  # nltk: rouge-score's Porter stemmer

    def expected_text(self, record: Mapping[str, Any]) -> str:
        return str(record["summary"])

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record["document"])

    streams = True
    # Not page by page: while its workers are behind (ROUGE is the slowest scorer, ~0.8k
    # samples/s) the server would hold each committed sample's document; a finished
    # task is streamed from the store in bounded memory instead.
    pages = False

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        return self._evaluate_measured(scored, every)

    def measure_state(self) -> Any:
        return new_rouge_scorer()  # its stems memoised from one page to the next

    def measure(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample], state: Any
    ) -> tuple[list[Row], dict[str, np.ndarray]]:
        seen: dict[tuple[str, str], list[float]] = {}
        # Columns: (P, R, F) for each rouge type, in ROUGE_TYPES order.
        table: list[list[float]] = []
        for sample in scored:
            pair = (str(sample.record["summary"]), sample.output or "")
            values = seen.get(pair)
            if values is None:
                result = state.score(*pair)
                values = [
                    float(v)
                    for t in ROUGE_TYPES
                    for v in (result[t].precision, result[t].recall, result[t].fmeasure)
                ]
                seen[pair] = values
            table.append(values)
        rows = [
            Row(
                scores={METRIC_NAMES[t]: values[3 * i + 2] for i, t in enumerate(ROUGE_TYPES)},
                primary=values[8],  # rougeL F
            )
            for values in table
        ]
        columns: FloatArray = np.array(table, dtype=np.float64).reshape(len(table), 12)
        return rows, {"rouge": columns}

    def conclude(self, columns: Mapping[str, np.ndarray]) -> Evaluation:
        table: FloatArray = columns["rouge"]
        f_columns = table[:, 2::3]
        means = table.mean(axis=0) if len(table) else np.zeros(12)
        metrics = {METRIC_NAMES[t]: float(means[3 * i + 2]) for i, t in enumerate(ROUGE_TYPES)}
        rouge = tuple(
            RougeScore(t, float(means[3 * i]), float(means[3 * i + 1]), float(means[3 * i + 2]))
            for i, t in enumerate(ROUGE_TYPES)
        )

        def statistic(weights: FloatArray) -> dict[str, FloatArray]:
            resampled = (weights @ f_columns) / weights.sum(axis=1)[:, None]
            return {METRIC_NAMES[t]: resampled[:, i] for i, t in enumerate(ROUGE_TYPES)}

        def build_payload(worst: tuple[WorstExample, ...]) -> SummarizationPayload:
            return SummarizationPayload(rouge=rouge, stemming=True, worst_examples=worst)

        return Evaluation(
            rows=[], metrics=metrics, statistic=statistic, build_payload=build_payload
        )
