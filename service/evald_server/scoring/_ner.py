"""Named entities: entity-level micro precision / recall / F1, and per type.

Gold entities come from ``entities``, or from BIO ``tokens`` + ``tags`` (each span's
tokens joined by one space, seqeval's default chunking). Predictions are parsed from
the output by ``_entities.parse_entities``; an unparseable output is an empty
prediction flagged ``unparseable_output`` (list items that are not entities:
``invalid_entity``).

Matching. An entity is the pair (text with whitespace collapsed, case kept; type).
A predicted type is stripped and, when it equals a gold type of the task ignoring
case, spelled like that gold type. Per sample, gold and predicted entities are
multisets: TP = Σ min(gold count, predicted count) over pairs, FP = predicted − TP,
FN = gold − TP. Micro P = ΣTP / (ΣTP + ΣFP), R = ΣTP / (ΣTP + ΣFN),
F1 = 2ΣTP / (2ΣTP + ΣFP + ΣFN), 0 when undefined; per type the same within the type.
On BIO data this equals seqeval's span matching whenever a surface string does not
occur twice in one sentence as *different* spans of the same type (positions are not
in a model's JSON answer, so they cannot be compared).
"""

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.datasets import gold_entities
from evald_server.domain import TaskType
from evald_server.scoring._common import BaseScorer, Evaluation, Row
from evald_server.scoring._entities import parse_entities
from evald_server.scoring._intervals import FloatArray, safe_div
from evald_server.scoring._normalize import collapse_whitespace
from evald_server.scoring._payloads import EntityTypeMetrics, NerPayload, WorstExample
from evald_server.scoring._types import ScoringSample

UNPARSEABLE = "unparseable_output"
INVALID_ENTITY = "invalid_entity"

_Key = tuple[str, str]


def _gold(record: Mapping[str, Any]) -> list[_Key]:
    return [(collapse_whitespace(e["text"]), e["type"]) for e in gold_entities(record)]


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(tp: float, fp: float, fn: float) -> float:
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


class NerScorer(BaseScorer):
    name = "ner"
    version = "1.0.0"
    task_type = TaskType.NER
    primary_metric = "f1"

    def expected_text(self, record: Mapping[str, Any]) -> str:
        return json.dumps(gold_entities(record), ensure_ascii=False)

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record["text"]) if "text" in record else " ".join(record["tokens"])

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        golds = [_gold(s.record) for s in scored]
        spelling: dict[str, str] = {}
        for entity_type in sorted({t for gold in golds for _, t in gold}):
            spelling.setdefault(entity_type.casefold(), entity_type)
        rows: list[Row] = []
        per_type: dict[str, list[int]] = {}  # type → [tp, gold, predicted]
        unparseable = 0
        for sample, gold in zip(scored, golds, strict=True):
            parsed = parse_entities(sample.output or "")
            predicted = [
                (collapse_whitespace(text), spelling.get(kind.strip().casefold(), kind.strip()))
                for text, kind in parsed.entities or ()
            ]
            gold_counts, predicted_counts = Counter(gold), Counter(predicted)
            matched = gold_counts & predicted_counts
            for counts, slot in ((matched, 0), (gold_counts, 1), (predicted_counts, 2)):
                for (_, kind), count in counts.items():
                    per_type.setdefault(kind, [0, 0, 0])[slot] += count
            tp = sum(matched.values())
            fp, fn = len(predicted) - tp, len(gold) - tp
            flags: tuple[str, ...] = (UNPARSEABLE,) if parsed.entities is None else ()
            flags += (INVALID_ENTITY,) if parsed.dropped else ()
            unparseable += parsed.entities is None
            f1 = _f1(tp, fp, fn)
            rows.append(
                Row(
                    scores={"tp": float(tp), "fp": float(fp), "fn": float(fn), "f1": f1},
                    primary=f1,
                    correct=fp == 0 and fn == 0,
                    flags=flags,
                    note=f"tp={tp} fp={fp} fn={fn}" + (f", {', '.join(flags)}" if flags else ""),
                )
            )
        columns: FloatArray = np.array(
            [[row.scores["tp"], row.scores["fp"], row.scores["fn"]] for row in rows],
            dtype=np.float64,
        ).reshape(len(rows), 3)

        def micro(sums: FloatArray) -> dict[str, FloatArray]:
            tp, fp, fn = sums[..., 0], sums[..., 1], sums[..., 2]
            return {
                "precision": safe_div(tp, tp + fp),
                "recall": safe_div(tp, tp + fn),
                "f1": safe_div(2 * tp, 2 * tp + fp + fn),
            }

        metrics = {name: float(value) for name, value in micro(columns.sum(axis=0)).items()}
        types = tuple(
            EntityTypeMetrics(
                entity_type=kind,
                precision=_ratio(tp, predicted),
                recall=_ratio(tp, gold),
                f1=_ratio(2 * tp, gold + predicted),
                support=gold,
                predicted=predicted,
            )
            for kind, (tp, gold, predicted) in sorted(per_type.items())
        )

        def build_payload(worst: tuple[WorstExample, ...]) -> NerPayload:
            return NerPayload(per_type=types, unparseable_outputs=unparseable, worst_examples=worst)

        return Evaluation(
            rows=rows,
            metrics=metrics,
            statistic=lambda weights: micro(weights @ columns),
            build_payload=build_payload,
        )
