"""Structured outputs: schema validity, and field-level exact match and F1.

Each answer is read as JSON: the whole answer, trimmed, or the inside of one Markdown
code fence around it (```json … ```); NaN and Infinity are not JSON. Per sample:

* ``json_valid`` — the answer is JSON;
* ``schema_valid`` — and it validates against the record's ``json_schema`` (by
  ``jsonschema``, the draft the schema names or 2020-12, ``pattern`` by RE2, no
  ``format`` assertions, no reference resolved outside the schema);
* with a ``reference``: ``field_exact_match`` — the answer equals it (JSON equality:
  ``1`` equals ``1.0``, ``true`` does not equal ``1``, strings exactly); ``field_f1`` —
  the F1 of the leaf fields, each leaf a path (object keys, array indexes) and a
  value, the empty object and array leaves themselves: matched leaves over the
  answer's (precision) and the reference's (recall). An answer that is not JSON
  scores 0 on both.

Flags: ``invalid_json``, ``schema_violation``. Headline: ``schema_valid_rate`` and
``json_valid_rate`` over all scored samples; ``field_exact_match`` and ``field_f1``
over the samples whose record has a reference (absent when none has one). Bootstrap
intervals over records for all; Wilson intervals for the two rates.
"""

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.domain import TaskType
from evald_server.scoring._common import BaseScorer, Evaluation, Row
from evald_server.scoring._intervals import FloatArray, safe_div
from evald_server.scoring._payloads import StructuredOutputPayload, WorstExample
from evald_server.scoring._types import ScoringSample

_FENCE = re.compile(r"^```[A-Za-z]*[ \t]*\n(.*)\n```$", re.DOTALL)
_COLUMNS = ("json_valid", "schema_valid", "has_reference", "field_exact_match", "field_f1")


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str) -> None:
    raise _NotJson(f"{name} is not JSON")


def parse_answer(output: str) -> Any:
    """The answer's JSON value, or ``ValueError``."""
    text = output.strip()
    fenced = _FENCE.match(text)
    if fenced is not None:
        text = fenced.group(1).strip()
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise _NotJson("nested too deep") from None


def leaves(
    value: Any, path: tuple[str | int, ...] = ()
) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            yield from leaves(child, (*path, key))
    elif isinstance(value, list) and value:
        for index, child in enumerate(value):
            yield from leaves(child, (*path, index))
    else:
        yield path, value


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value, booleans apart from numbers."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def field_f1(answer: Any, reference: Any) -> float:
    made = dict(leaves(answer))
    wanted = dict(leaves(reference))
    matched = sum(
        1 for path, value in wanted.items() if path in made and json_equal(made[path], value)
    )
    if not matched:
        return 0.0
    precision, recall = matched / len(made), matched / len(wanted)
    return 2 * precision * recall / (precision + recall)


def sample_verdict(
    output: str, record: Mapping[str, Any], validators: dict[str, Any] | None = None
) -> tuple[dict[str, float], tuple[str, ...], str]:
    """The per-sample scores, flags and a note of one answer to one record."""
    has_reference = "reference" in record
    scores = {"json_valid": 0.0, "schema_valid": 0.0}
    try:
        answer = parse_answer(output)
    except ValueError as exc:
        if has_reference:
            scores |= {"field_exact_match": 0.0, "field_f1": 0.0}
        return scores, ("invalid_json",), f"not JSON: {str(exc)[:120]}"
    scores["json_valid"] = 1.0
    schema = record["json_schema"]
    key = json.dumps(schema, sort_keys=True)
    cache = {} if validators is None else validators
    validator = cache.get(key)
    if validator is None:
        # Here, not at the top: jsonschema is loaded by the workers that score this type.
        from evald_server.datasets import schema_validator

        validator = cache[key] = schema_validator(schema)
    try:
        error = next(iter(validator.iter_errors(answer)), None)
        problem = None if error is None else error.message
    except RecursionError:
        problem = "the answer nests too deep to validate"
    except Exception as exc:  # a keyword that cannot judge this value: not valid
        problem = f"cannot be validated ({type(exc).__name__})"
    flags: tuple[str, ...] = ()
    note = "valid"
    if problem is None:
        scores["schema_valid"] = 1.0
    else:
        flags = ("schema_violation",)
        note = f"schema: {problem[:160]}"
    if has_reference:
        scores["field_exact_match"] = float(json_equal(answer, record["reference"]))
        scores["field_f1"] = field_f1(answer, record["reference"])
        note += f", field F1 {scores['field_f1']:.3f}"
    return scores, flags, note


class StructuredOutputScorer(BaseScorer):
    name = "structured_output"
    version = "1.0.0"
    task_type = TaskType.STRUCTURED_OUTPUT
    primary_metric = "schema_valid"
    libraries = ("numpy", "jsonschema")

    def expected_text(self, record: Mapping[str, Any]) -> str:
        if "reference" in record:
            return json.dumps(record["reference"], ensure_ascii=False)
        return json.dumps(record["json_schema"], ensure_ascii=False)

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record["input"])

    streams = True
    pages = True

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        return self._evaluate_measured(scored, every)

    def measure_state(self) -> Any:
        return {}  # validators by schema, reused from page to page

    def measure(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample], state: Any
    ) -> tuple[list[Row], dict[str, np.ndarray]]:
        rows: list[Row] = []
        values = []
        for sample in scored:
            scores, flags, note = sample_verdict(sample.output or "", sample.record, state)
            has_reference = "field_f1" in scores
            primary = (
                min(scores["schema_valid"], scores["field_f1"])
                if has_reference
                else scores["schema_valid"]
            )
            rows.append(
                Row(
                    scores=scores,
                    primary=primary,
                    correct=bool(scores["schema_valid"])
                    and (not has_reference or bool(scores["field_exact_match"])),
                    flags=flags,
                    note=note,
                )
            )
            values.append(
                [
                    scores["json_valid"],
                    scores["schema_valid"],
                    float(has_reference),
                    scores.get("field_exact_match", 0.0),
                    scores.get("field_f1", 0.0),
                ]
            )
        columns: FloatArray = np.array(values, dtype=np.float64).reshape(len(rows), len(_COLUMNS))
        return rows, {"values": columns}

    def conclude(self, columns: Mapping[str, np.ndarray]) -> Evaluation:
        values: FloatArray = columns["values"]
        n = len(values)
        sums = values.sum(axis=0)
        referenced = sums[2] > 0

        def metrics_of(total: FloatArray, sums: FloatArray) -> dict[str, FloatArray]:
            found = {
                "schema_valid_rate": safe_div(sums[:, 1], total),
                "json_valid_rate": safe_div(sums[:, 0], total),
            }
            if referenced:
                found["field_exact_match"] = safe_div(sums[:, 3], sums[:, 2])
                found["field_f1"] = safe_div(sums[:, 4], sums[:, 2])
            return found

        point = metrics_of(np.array([float(n)]), sums.reshape(1, -1))
        metrics = {name: float(v[0]) for name, v in point.items()}

        def statistic(weights: FloatArray) -> dict[str, FloatArray]:
            return metrics_of(weights.sum(axis=1), weights @ values)

        def build_payload(worst: tuple[WorstExample, ...]) -> StructuredOutputPayload:
            return StructuredOutputPayload(
                schema_valid_rate=metrics["schema_valid_rate"],
                json_valid_rate=metrics["json_valid_rate"],
                field_exact_match=metrics.get("field_exact_match", 0.0),
                field_f1=metrics.get("field_f1", 0.0),
                invalid_json=int(n - sums[0]),
                schema_violations=int(sums[0] - sums[1]),
                with_reference=int(sums[2]),
                worst_examples=worst,
            )

        proportions = {"schema_valid_rate": float(sums[1]), "json_valid_rate": float(sums[0])}
        return Evaluation(
            rows=[],
            metrics=metrics,
            statistic=statistic,
            build_payload=build_payload,
            proportions=proportions,
        )
