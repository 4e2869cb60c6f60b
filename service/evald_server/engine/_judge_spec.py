"""What a run asks of model-graded scoring: ``JudgeSpec`` (judge model, rubric, score
format, rounds), validated on construction and stored inside the run's spec.

The rubric is a prompt template over ``{input}``, ``{reference}`` and ``{output}`` (the
record's input, its reference answer and the answer being graded); any other
``{word}`` is a mistake and is refused. evald fences each value as data and appends the
instruction that fixes the verdict's format (``_judge_data``), so the format can be
parsed strictly.
"""

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evald_server.config import GenerationParams
from evald_server.domain import JudgeScoreFormat
from evald_server.engine._judge_data import FRAMING

PLACEHOLDERS = ("input", "reference", "output")
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_RUBRIC_CHARS = 8000
MAX_ROUNDS = 9
MAX_PARSE_RETRIES = 10
MAX_SCALE_SPAN = 100

DEFAULT_RUBRIC = (
    "You grade an answer to a task against its reference answer.\n\n"
    "Task:\n{input}\n\nReference answer:\n{reference}\n\nAnswer to grade:\n{output}\n\n"
    "Explain briefly whether the answer is correct and complete given the reference."
)


@dataclass(frozen=True, slots=True)
class JudgeSpec:
    """Model-graded scoring of every answer of a run by ``model_id``."""

    model_id: str
    rubric: str = DEFAULT_RUBRIC
    score_format: JudgeScoreFormat = JudgeScoreFormat.PASS_FAIL
    scale_min: int = 1
    scale_max: int = 5
    # SCALE: a score at or above this passes (judge_pass_rate); default scale_max.
    pass_threshold: int | None = None
    rounds: int = 1  # judge each answer this many times (repeat-k); agreement reported
    # An unparseable verdict is asked again while the subtask has made at most
    # parse_retries attempts (provider failures spend attempts too), so at most
    # parse_retries + 1 replies without a verdict are paid for.
    parse_retries: int = 2
    params: GenerationParams | None = None  # over the judge model's defaults

    @property
    def threshold(self) -> float:
        if self.score_format is JudgeScoreFormat.PASS_FAIL:
            return 1.0
        return float(self.scale_max if self.pass_threshold is None else self.pass_threshold)

    def rubric_sha256(self) -> str:
        """Hash of everything that shapes the judge's prompt and its parsing: the rubric,
        its format and scale, and the framing evald writes around it (``FRAMING``)."""
        text = "\x1f".join(
            (
                FRAMING,
                self.rubric,
                self.score_format.value,
                str(self.scale_min),
                str(self.scale_max),
            )
        )
        return hashlib.sha256(text.encode()).hexdigest()

    def problems(self, prefix: str = "judge") -> list[tuple[str, str]]:
        problems = []
        if not isinstance(self.model_id, str) or not self.model_id:
            problems.append((f"{prefix}.model_id", "a judge model id is required"))
        if not self.rubric.strip():
            problems.append((f"{prefix}.rubric", "must not be empty"))
        elif len(self.rubric) > MAX_RUBRIC_CHARS:
            problems.append((f"{prefix}.rubric", f"at most {MAX_RUBRIC_CHARS} characters"))
        else:
            unknown = sorted(set(PLACEHOLDER.findall(self.rubric)) - set(PLACEHOLDERS))
            if unknown:
                problems.append(
                    (
                        f"{prefix}.rubric",
                        f"unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
                        "use {input}, {reference} and {output}",
                    )
                )
            if "{output}" not in self.rubric:
                problems.append((f"{prefix}.rubric", "must show the answer: {output}"))
        if self.score_format is JudgeScoreFormat.SCALE:
            if not self.scale_min < self.scale_max <= self.scale_min + MAX_SCALE_SPAN:
                problems.append(
                    (
                        f"{prefix}.scale_max",
                        f"must be above scale_min and at most {MAX_SCALE_SPAN} above it",
                    )
                )
            elif self.pass_threshold is not None and not (
                self.scale_min <= self.pass_threshold <= self.scale_max
            ):
                problems.append((f"{prefix}.pass_threshold", "must lie on the scale"))
        if not 1 <= self.rounds <= MAX_ROUNDS:
            problems.append((f"{prefix}.rounds", f"must be between 1 and {MAX_ROUNDS}"))
        if not 0 <= self.parse_retries <= MAX_PARSE_RETRIES:
            problems.append(
                (f"{prefix}.parse_retries", f"must be between 0 and {MAX_PARSE_RETRIES}")
            )
        return problems

    def to_json(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "rubric": self.rubric,
            "score_format": self.score_format.value,
            "scale_min": self.scale_min,
            "scale_max": self.scale_max,
            "pass_threshold": self.pass_threshold,
            "rounds": self.rounds,
            "parse_retries": self.parse_retries,
            "params": None
            if self.params is None
            else self.params.model_dump(mode="json", exclude_unset=True),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "JudgeSpec":
        params = data.get("params")
        return cls(
            model_id=str(data["model_id"]),
            rubric=str(data.get("rubric", DEFAULT_RUBRIC)),
            score_format=JudgeScoreFormat(data.get("score_format", "pass_fail")),
            scale_min=int(data.get("scale_min", 1)),
            scale_max=int(data.get("scale_max", 5)),
            pass_threshold=data.get("pass_threshold"),
            rounds=int(data.get("rounds", 1)),
            parse_retries=int(data.get("parse_retries", 2)),
            params=None if params is None else GenerationParams.model_validate(params),
        )
