"""Extractive QA: SQuAD v1.1 exact match and token F1.

Per sample, EM and F1 are the maximum over the record's gold ``answers`` with the
SQuAD normalisation (see ``_normalize``); the headline numbers are their means. An
output that normalises to nothing is flagged ``no_answer`` (it still scores 0, or 1
against a gold answer that also normalises to nothing, as in the official script).
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.domain import TaskType
from evald_server.scoring._common import BaseScorer, Evaluation, Row
from evald_server.scoring._intervals import FloatArray
from evald_server.scoring._normalize import squad_best, squad_normalize
from evald_server.scoring._payloads import QaPayload, WorstExample
from evald_server.scoring._types import ScoringSample

NO_ANSWER = "no_answer"


class QaScorer(BaseScorer):
    name = "qa"
    version = "1.0.0"
    task_type = TaskType.QA
    primary_metric = "f1"

    def expected_text(self, record: Mapping[str, Any]) -> str:
        return " | ".join(record["answers"])

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record["question"])

    streams = True
    pages = True  # a page is a measure of its samples (BaseScorer.score_page)

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        return self._evaluate_measured(scored, every)

    def measure(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample], state: Any
    ) -> tuple[list[Row], dict[str, np.ndarray]]:
        rows: list[Row] = []
        for sample in scored:
            output = sample.output or ""
            answers = sample.record["answers"]
            em, f1 = squad_best(output, answers)
            empty = not squad_normalize(output)
            rows.append(
                Row(
                    scores={"exact_match": em, "f1": f1},
                    primary=f1,
                    correct=em == 1.0,
                    flags=(NO_ANSWER,) if empty else (),
                    note="no answer" if empty else f"best EM {em:g}, F1 {f1:.3f}",
                    answer=squad_normalize(output),
                )
            )
        scores: FloatArray = np.array(
            [[row.scores["exact_match"], row.scores["f1"]] for row in rows], dtype=np.float64
        ).reshape(len(rows), 2)
        no_answer = np.fromiter((bool(row.flags) for row in rows), dtype=np.bool_, count=len(rows))
        return rows, {"scores": scores, "no_answer": no_answer}

    def conclude(self, columns: Mapping[str, np.ndarray]) -> Evaluation:
        scores: FloatArray = columns["scores"]
        n = len(scores)
        no_answer = int(columns["no_answer"].sum())
        means = scores.mean(axis=0) if n else np.zeros(2)
        metrics = {"exact_match": float(means[0]), "f1": float(means[1])}

        def statistic(weights: FloatArray) -> dict[str, FloatArray]:
            sums = weights @ scores
            total = weights.sum(axis=1)
            return {"exact_match": sums[:, 0] / total, "f1": sums[:, 1] / total}

        def build_payload(worst: tuple[WorstExample, ...]) -> QaPayload:
            return QaPayload(
                exact_match=metrics["exact_match"],
                f1=metrics["f1"],
                answered=n - no_answer,
                no_answer_outputs=no_answer,
                worst_examples=worst,
            )

        return Evaluation(
            rows=[],
            metrics=metrics,
            statistic=statistic,
            build_payload=build_payload,
            proportions={"exact_match": float(scores[:, 0].sum())},
        )
