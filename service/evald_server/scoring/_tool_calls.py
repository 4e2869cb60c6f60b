"""Tool calls: exact call match, argument accuracy, call precision / recall / F1.

Each sample's output is its stored tool answer (``domain.decode_tool_answer``: the
calls the provider boundary parsed). Per sample, with the matching rules of
``_call_matching``:

* ``exact_match`` — 1 when the calls made pair one to one with the calls expected and
  every pair matches exactly (no call made and none expected is an exact match);
* ``argument_accuracy`` — the mean over expected calls of the largest fraction of the
  call's expected arguments that one call made with its name matched (1 for a call
  without arguments that was made); with no call expected, 1 when none was made;
* ``matched_calls``, ``calls_made``, ``calls_expected`` — the counts behind the
  task's micro-averaged ``call_precision`` (matched / made), ``call_recall`` (matched
  / expected) and their harmonic mean ``call_f1``; 0 where a denominator is 0, except
  that no call made and none expected is 1 for all three.

Flags name what went wrong: ``no_call`` (none made where one was expected),
``malformed_arguments`` (a call's arguments are not a JSON object), ``wrong_name`` (a
call to a function no expected call names),
``extra_calls`` (more calls than expected), ``wrong_argument_type``, ``missing_call``
(fewer calls than expected). Headline metrics are means over samples (exact match,
argument accuracy) or ratios of sums (precision, recall, F1), each with a bootstrap
interval over records; exact match also with a Wilson interval.
"""

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.domain import NotAToolAnswer, TaskType, ToolCall, decode_tool_answer
from evald_server.scoring._call_matching import compare_call, matched_pairs
from evald_server.scoring._common import BaseScorer, Evaluation, Row
from evald_server.scoring._intervals import FloatArray, safe_div
from evald_server.scoring._payloads import ToolCallPayload, WorstExample
from evald_server.scoring._types import ScoringSample

FLAGS = (
    "no_call",
    "malformed_arguments",
    "wrong_name",
    "extra_calls",
    "wrong_argument_type",
    "missing_call",
)
# Columns, in this order: the per-sample numbers the metrics are computed from.
_NUMBERS = ("exact_match", "argument_accuracy", "matched_calls", "calls_made", "calls_expected")


def _calls(output: str) -> tuple[ToolCall, ...]:
    try:
        return decode_tool_answer(output)[1]
    except NotAToolAnswer:
        return ()  # text where calls were due: no call


def _parameters(record: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {
        tool["function"]["name"]: tool["function"].get("parameters") or {}
        for tool in record["tools"]
    }


def sample_verdict(
    output: str, record: Mapping[str, Any]
) -> tuple[dict[str, float], tuple[str, ...]]:
    """The per-sample scores and flags of one answer to one record."""
    made = _calls(output)
    expected: Sequence[Mapping[str, Any]] = record["expected_calls"]
    parameters = _parameters(record)
    comparisons = [
        [compare_call(call, want, parameters.get(want["name"], {})) for want in expected]
        for call in made
    ]
    matched = matched_pairs([[c.exact for c in row] for row in comparisons])
    if expected:
        fractions = []
        for j, want in enumerate(expected):
            total = len(want.get("arguments", {}))
            named = [
                row[j]
                for row, call in zip(comparisons, made, strict=True)
                if call.name == want["name"] and call.arguments is not None
            ]
            best = max((c.arguments_matched for c in named), default=-1)
            fractions.append(0.0 if best < 0 else 1.0 if total == 0 else best / total)
        argument_accuracy = sum(fractions) / len(fractions)
    else:
        argument_accuracy = 0.0 if made else 1.0
    exact = len(made) == len(expected) == matched
    names = {want["name"] for want in expected}
    flags = {
        "no_call": not made and bool(expected),
        "malformed_arguments": any(call.arguments is None for call in made),
        "wrong_name": any(call.name not in names for call in made),
        "extra_calls": len(made) > len(expected),
        "wrong_argument_type": any(c.wrong_type for row in comparisons for c in row),
        "missing_call": len(made) < len(expected),
    }
    scores = {
        "exact_match": float(exact),
        "argument_accuracy": argument_accuracy,
        "matched_calls": float(matched),
        "calls_made": float(len(made)),
        "calls_expected": float(len(expected)),
    }
    scores.update(_ratios(float(matched), float(len(made)), float(len(expected))))
    return scores, tuple(name for name in FLAGS if flags[name])


def _ratios(matched: float, made: float, expected: float) -> dict[str, float]:
    if made == 0 and expected == 0:
        return {"call_precision": 1.0, "call_recall": 1.0, "call_f1": 1.0}
    precision = matched / made if made else 0.0
    recall = matched / expected if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"call_precision": precision, "call_recall": recall, "call_f1": f1}


class ToolCallScorer(BaseScorer):
    name = "tool_call"
    version = "1.0.0"
    task_type = TaskType.TOOL_CALL
    primary_metric = "call_f1"

    def expected_text(self, record: Mapping[str, Any]) -> str:
        return json.dumps(record["expected_calls"], ensure_ascii=False)

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record["input"])

    streams = True
    pages = True

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        return self._evaluate_measured(scored, every)

    def measure(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample], state: Any
    ) -> tuple[list[Row], dict[str, np.ndarray]]:
        rows: list[Row] = []
        for sample in scored:
            scores, flags = sample_verdict(sample.output or "", sample.record)
            note = ", ".join(flags) or (
                f"{scores['matched_calls']:g} of {scores['calls_expected']:g} calls matched"
            )
            rows.append(
                Row(
                    scores=scores,
                    primary=scores["call_f1"],
                    correct=scores["exact_match"] == 1.0,
                    flags=flags,
                    note=note,
                )
            )
        numbers: FloatArray = np.array(
            [[row.scores[name] for name in _NUMBERS] for row in rows], dtype=np.float64
        ).reshape(len(rows), len(_NUMBERS))
        flagged = np.array(
            [[name in row.flags for name in FLAGS] for row in rows], dtype=np.bool_
        ).reshape(len(rows), len(FLAGS))
        return rows, {"numbers": numbers, "flags": flagged}

    def conclude(self, columns: Mapping[str, np.ndarray]) -> Evaluation:
        numbers: FloatArray = columns["numbers"]
        counts = columns["flags"].sum(axis=0)
        sums = numbers.sum(axis=0)
        n = len(numbers)

        def metrics_of(total: FloatArray, sums: FloatArray) -> dict[str, FloatArray]:
            # total: (r,), sums: (r, 5) — the weighted samples and their column sums.
            matched, made, expected = sums[:, 2], sums[:, 3], sums[:, 4]
            nothing = (made == 0) & (expected == 0)
            precision = np.where(nothing, 1.0, safe_div(matched, made))
            recall = np.where(nothing, 1.0, safe_div(matched, expected))
            f1 = np.where(nothing, 1.0, safe_div(2 * precision * recall, precision + recall))
            return {
                "exact_match": safe_div(sums[:, 0], total),
                "argument_accuracy": safe_div(sums[:, 1], total),
                "call_precision": precision,
                "call_recall": recall,
                "call_f1": f1,
            }

        point = metrics_of(np.array([float(n)]), sums.reshape(1, -1))
        metrics = {name: float(values[0]) for name, values in point.items()}

        def statistic(weights: FloatArray) -> dict[str, FloatArray]:
            return metrics_of(weights.sum(axis=1), weights @ numbers)

        def build_payload(worst: tuple[WorstExample, ...]) -> ToolCallPayload:
            flag = dict(zip(FLAGS, (int(c) for c in counts), strict=True))
            shown = metrics if n else dict.fromkeys(metrics, 0.0)  # nothing scored: zeros
            return ToolCallPayload(
                exact_match=shown["exact_match"],
                argument_accuracy=shown["argument_accuracy"],
                call_precision=shown["call_precision"],
                call_recall=shown["call_recall"],
                call_f1=shown["call_f1"],
                no_call=flag["no_call"],
                malformed_arguments=flag["malformed_arguments"],
                wrong_name=flag["wrong_name"],
                extra_calls=flag["extra_calls"],
                wrong_argument_type=flag["wrong_argument_type"],
                calls_made=int(sums[3]),
                calls_expected=int(sums[4]),
                worst_examples=worst,
            )

        return Evaluation(
            rows=[],
            metrics=metrics,
            statistic=statistic,
            build_payload=build_payload,
            proportions={"exact_match": float(sums[0]) if n else 0.0},
        )
