"""A judge subtask's call: the rubric rendered over one answer, and the verdict parsed
from the judge's answer.

The rendered prompt is a notice, the rubric with each value it shows (input, reference,
output) fenced as data (``_judge_data``: a fence drawn afresh for every prompt), and the
instruction that fixes the verdict's format.

The verdict is the judge's *final* line, in the run's score format — ``VERDICT: PASS``
/ ``VERDICT: FAIL``, or ``SCORE: <n>`` with n on the scale. Verdict-like lines before
it (a judge quoting an answer that ends with ``VERDICT: PASS``, or thinking aloud) are
rationale, not a second verdict. A reply whose last line is not a verdict is
JUDGE_VERDICT_UNPARSEABLE: the subtask is asked again (a retry at once, spending an
attempt) while it has made at most ``parse_retries`` attempts, this one included
(provider failures spend attempts too), else it fails permanently with that reason: at
most ``parse_retries`` + 1 replies without a verdict are ever paid for. Everything
before the verdict line is the judge's rationale.
"""

import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from evald_server.datasets import ChatPrompt, expected_text, prompt_text
from evald_server.domain import (
    ChatMessage,
    ErrorReason,
    EvalError,
    JudgeScoreFormat,
    OutcomeKind,
    TaskType,
)
from evald_server.engine._judge_data import (
    PASS_FAIL_INSTRUCTION,
    SCALE_INSTRUCTION,
    Draw,
    draw_fence,
    fenced,
    notice,
)
from evald_server.engine._judge_spec import PLACEHOLDER, JudgeSpec
from evald_server.store import ClaimedSubtask, SubtaskOutcome

_VERDICT = re.compile(r"VERDICT:\s*(PASS|FAIL)", re.IGNORECASE)
_SCORE = re.compile(r"SCORE:\s*([+-]?\d{1,4})", re.IGNORECASE)
MAX_RATIONALE_CHARS = 4000


@dataclass(frozen=True, slots=True)
class JudgePrompt:
    """Renders the judge's messages for one answer of a task of ``task_type``: the
    input is the prompt the answering model was sent (``answer_prompt``)."""

    spec: JudgeSpec
    task_type: TaskType
    answer_prompt: ChatPrompt

    def instruction(self) -> str:
        if self.spec.score_format is JudgeScoreFormat.PASS_FAIL:
            return PASS_FAIL_INSTRUCTION
        return SCALE_INSTRUCTION.format(
            scale_min=self.spec.scale_min, scale_max=self.spec.scale_max
        )

    def values(self, fields: Mapping[str, Any], record_id: str, answer: str) -> dict[str, str]:
        """What the rubric's placeholders show: the judged text, all of it untrusted."""
        return {
            "input": prompt_text(self.answer_prompt.render(fields, record_id)),
            "reference": expected_text(self.task_type, fields),
            "output": answer,
        }

    def render(
        self,
        fields: Mapping[str, Any],
        record_id: str,
        answer: str,
        *,
        draw: Draw = secrets.token_hex,
    ) -> tuple[ChatMessage, ...]:
        """One user message: the notice, the rubric with each value fenced as data, the
        verdict's format. Every call draws a new fence (``draw``: its random source)."""
        values = self.values(fields, record_id, answer)
        fence = draw_fence((self.spec.rubric, *values.values()), draw)
        blocks = {name: fenced(name, text, fence) for name, text in values.items()}
        # One pass over the template: a placeholder inside a value is never expanded.
        text = PLACEHOLDER.sub(lambda m: blocks.get(m.group(1), m.group(0)), self.spec.rubric)
        return (ChatMessage("user", f"{notice(fence)}\n\n{text}\n\n{self.instruction()}"),)

    def simulated_reference(self) -> dict[str, Any]:
        """What the simulated provider answers as a judge: a well-formed verdict."""
        if self.spec.score_format is JudgeScoreFormat.PASS_FAIL:
            return {"expected": "VERDICT: PASS", "distractors": ["VERDICT: FAIL"]}
        return {
            "expected": f"SCORE: {self.spec.scale_max}",
            "distractors": [f"SCORE: {self.spec.scale_min}"],
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    score: float  # 1.0 / 0.0 for pass/fail, else the integer score
    rationale: str


def parse_verdict(text: str, spec: JudgeSpec) -> Verdict | None:
    """The verdict of a judge's answer — its last non-empty line, in the asked format —
    or None when that line is none."""
    pattern = _VERDICT if spec.score_format is JudgeScoreFormat.PASS_FAIL else _SCORE
    lines = [line.strip() for line in text.strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return None
    last = pattern.fullmatch(lines[-1])
    if last is None:
        return None
    if spec.score_format is JudgeScoreFormat.PASS_FAIL:
        score = 1.0 if last.group(1).upper() == "PASS" else 0.0
    else:
        value = int(last.group(1))
        if not spec.scale_min <= value <= spec.scale_max:
            return None
        score = float(value)
    rationale = "\n".join(lines[:-1])[:MAX_RATIONALE_CHARS]
    return Verdict(score, rationale)


def judged(outcome: SubtaskOutcome, item: ClaimedSubtask, spec: JudgeSpec) -> SubtaskOutcome:
    """A judge call's outcome with its verdict parsed: succeeded with ``verdict``, or
    JUDGE_VERDICT_UNPARSEABLE (retried at once within ``parse_retries``)."""
    if outcome.kind is not OutcomeKind.SUCCEEDED:
        return outcome
    verdict = parse_verdict(outcome.output or "", spec)
    if verdict is not None:
        return replace(outcome, verdict=verdict.score)
    error = EvalError.of(
        ErrorReason.JUDGE_VERDICT_UNPARSEABLE,
        f"judge {item.model_id} answered without a verdict line in the {spec.score_format} "
        f"format: {(outcome.output or '')[-120:]!r}",
        judgeModel=item.model_id,
    )
    attempts = item.attempt + 1
    retry = attempts <= spec.parse_retries
    return replace(
        outcome,
        kind=OutcomeKind.RETRY if retry else OutcomeKind.FAILED_PERMANENT,
        output=None,
        error=error,
        next_attempt_at=time.time() if retry else None,
        cache_key=None,
    )
