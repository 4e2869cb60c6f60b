"""Free-form generation: one match rule per record (``match``, default ``exact``).

* ``exact``: output and reference are equal after casefolding and collapsing
  whitespace (punctuation counts: "Paris." is not "Paris").
* ``contains``: the reference, normalised the same way, occurs in the output.
* ``regex``: the reference, compiled by RE2 (linear time, whatever the pattern:
  ``datasets.compile_regex``), finds a match anywhere in the raw output (no flags).
  Uploads refuse patterns RE2 cannot compile; one that still does not (a dataset
  stored before) is flagged ``invalid_regex`` and wrong.
* ``numeric``: the last number in the output (``-?\\d[\\d,]*(\\.\\d+)?``, thousands
  commas removed) equals the reference's number — the number after ``####`` in a
  GSM8K-style reference, else its last number — within ``math.isclose(rel_tol=1e-9,
  abs_tol=1e-9)``. No number in the output: ``no_number``; none in the reference:
  ``invalid_reference``; both wrong.

The headline metric is ``accuracy`` over all scored samples, whatever their mode.
"""

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evald_server.datasets import (
    CompiledRegex,
    InvalidRegex,
    compile_regex,
    last_number,
    reference_number,
)
from evald_server.domain import TaskType
from evald_server.scoring._common import BaseScorer, Evaluation, Row
from evald_server.scoring._intervals import FloatArray
from evald_server.scoring._normalize import generation_key
from evald_server.scoring._payloads import GenerationPayload, MatchModeStats, WorstExample
from evald_server.scoring._types import ScoringSample

MODES = ("exact", "contains", "regex", "numeric")
INVALID_REGEX = "invalid_regex"
NO_NUMBER = "no_number"
INVALID_REFERENCE = "invalid_reference"
_REL_TOL = 1e-9
_ABS_TOL = 1e-9


class _Matcher:
    """The match rules, with compiled patterns cached per reference."""

    def __init__(self) -> None:
        self._patterns: dict[str, CompiledRegex | None] = {}

    def _pattern(self, reference: str) -> CompiledRegex | None:
        if reference not in self._patterns:
            try:
                self._patterns[reference] = compile_regex(reference)
            except InvalidRegex:
                self._patterns[reference] = None
        return self._patterns[reference]

    def match(self, mode: str, reference: str, output: str) -> tuple[bool, tuple[str, ...], str]:
        """(correct, flags, note)."""
        if mode == "contains":
            return generation_key(reference) in generation_key(output), (), ""
        if mode == "regex":
            pattern = self._pattern(reference)
            if pattern is None:
                return False, (INVALID_REGEX,), "reference is not a valid regex"
            return pattern.search(output) is not None, (), ""
        if mode == "numeric":
            expected = reference_number(reference)
            if expected is None:
                return False, (INVALID_REFERENCE,), "no number in the reference"
            found = last_number(output)
            if found is None:
                return False, (NO_NUMBER,), "no number in the output"
            correct = math.isclose(found, expected, rel_tol=_REL_TOL, abs_tol=_ABS_TOL)
            return correct, (), f"last number {found:g}, expected {expected:g}"
        return generation_key(output) == generation_key(reference), (), ""


def answer_key(mode: str, output: str) -> str:
    """The output as its mode compares it, for majority vote: the last number
    (``numeric``; "" when none), else the casefolded, whitespace-collapsed text."""
    if mode == "numeric":
        found = last_number(output)
        return "" if found is None else repr(found)
    return generation_key(output)


class GenerationScorer(BaseScorer):
    name = "generation"
    version = "1.1.0"  # 1.1: regex references matched by RE2
    libraries = ("numpy", "google-re2")
    task_type = TaskType.GENERATION
    primary_metric = "correct"

    def expected_text(self, record: Mapping[str, Any]) -> str:
        return str(record["reference"])

    def input_text(self, record: Mapping[str, Any]) -> str:
        return str(record["input"])

    streams = True
    pages = True  # a page is a measure of its samples (BaseScorer.score_page)

    def evaluate(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample]
    ) -> Evaluation:
        return self._evaluate_measured(scored, every)

    def measure_state(self) -> _Matcher:
        return _Matcher()

    def measure(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample], state: Any
    ) -> tuple[list[Row], dict[str, np.ndarray]]:
        matcher: _Matcher = state
        rows: list[Row] = []
        modes: list[str] = []
        for sample in scored:
            mode = str(sample.record.get("match", "exact"))
            correct, flags, note = matcher.match(
                mode, str(sample.record["reference"]), sample.output or ""
            )
            modes.append(mode)
            rows.append(
                Row(
                    scores={"correct": float(correct)},
                    primary=float(correct),
                    correct=correct,
                    flags=flags,
                    note=f"{mode}: {note}" if note else mode,
                    answer=answer_key(mode, sample.output or ""),
                )
            )
        correct_column = np.fromiter((row.correct for row in rows), dtype=np.bool_, count=len(rows))
        mode_column = np.array(modes, dtype=object).reshape(len(modes))
        return rows, {"correct": correct_column, "mode": mode_column}

    def conclude(self, columns: Mapping[str, np.ndarray]) -> Evaluation:
        correct_column = columns["correct"]
        per_mode = {mode: [0, 0] for mode in MODES}  # mode → [samples, correct]
        for mode, correct in zip(columns["mode"].tolist(), correct_column.tolist(), strict=True):
            counts = per_mode.setdefault(mode, [0, 0])
            counts[0] += 1
            counts[1] += correct
        column: FloatArray = correct_column.astype(np.float64)
        metrics = {"accuracy": float(column.mean()) if column.size else 0.0}
        stats = tuple(
            MatchModeStats(mode, samples, correct)
            for mode, (samples, correct) in per_mode.items()
            if samples
        )

        def build_payload(worst: tuple[WorstExample, ...]) -> GenerationPayload:
            return GenerationPayload(per_mode=stats, worst_examples=worst)

        return Evaluation(
            rows=[],
            metrics=metrics,
            statistic=lambda weights: {"accuracy": (weights @ column) / weights.sum(axis=1)},
            build_payload=build_payload,
            proportions={"accuracy": float(column.sum())},
        )
