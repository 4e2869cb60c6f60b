"""A judged task's verdicts: one ``AnswerJudgement`` per answer, and the judge metrics.

An answer judged in k rounds gets the mean of its rounds' scores; it passes when more
than half of its pass/fail rounds passed (a tie fails), or when its mean score reaches
the pass threshold on a scale. Rounds agree when every round that gave a verdict gave
the same one; ``judge_agreement_rate`` is the share of answers with at least two
verdicts whose rounds agree. Answers no round could judge (the judge failed, never gave
a parseable verdict, or was never asked: an answer that succeeded after its run was
cancelled) are left out of those rates, never silently: ``judge_coverage`` (judged /
answered, over the task's succeeded answers) stands beside them, also when no answer
could be judged at all, and they are counted in ``unjudged``.

Intervals as for every headline metric (``scoring._intervals``): a percentile
bootstrap that resamples records (all repeats of a record together), and Wilson for
the proportions.
"""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from evald_server.domain import ErrorReason, EvalError, JudgeScoreFormat, SubtaskState
from evald_server.engine._judge_spec import JudgeSpec
from evald_server.engine._judging import parse_verdict
from evald_server.scoring import (
    MetricUncertainty,
    bootstrap_distribution,
    percentile_interval,
    wilson_interval,
)
from evald_server.store import JudgeVerdictRow

RESAMPLES = 1000
PASS_RATE = "judge_pass_rate"
SCORE_MEAN = "judge_score_mean"
AGREEMENT = "judge_agreement_rate"
COVERAGE = "judge_coverage"


@dataclass(frozen=True, slots=True)
class AnswerJudgement:
    """What the judge made of one answer (ListSamples shows it)."""

    score: float | None  # mean over the rounds that gave a verdict
    passed: bool | None
    rationale: str  # the first verdict's reasoning
    rounds: int  # rounds that gave a verdict
    agreed: bool | None  # None with fewer than two verdicts
    error: EvalError | None = None  # no verdict at all: the last round's error

    def to_json(self) -> dict[str, object]:
        return {
            "score": self.score,
            "passed": self.passed,
            "rationale": self.rationale,
            "rounds": self.rounds,
            "agreed": self.agreed,
            "error": None if self.error is None else self.error.to_json(),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> "AnswerJudgement":
        error = data.get("error")
        score = data.get("score")
        return cls(
            score=None if score is None else float(score),  # type: ignore[arg-type]
            passed=None if data.get("passed") is None else bool(data["passed"]),
            rationale=str(data.get("rationale", "")),
            rounds=int(data.get("rounds", 0)),  # type: ignore[call-overload]
            agreed=None if data.get("agreed") is None else bool(data["agreed"]),
            error=None if error is None else EvalError.from_json(error),  # type: ignore[arg-type]
        )


@dataclass(frozen=True, slots=True)
class JudgeReport:
    metrics: dict[str, float]
    uncertainty: dict[str, MetricUncertainty]
    judgements: dict[int, AnswerJudgement]  # by the answer's subtask row id
    judged: int  # answers with a verdict
    unjudged: int  # answered, and no verdict (the judge failed, or was never asked)


def judge_answers(
    rows: Iterable[JudgeVerdictRow],
    spec: JudgeSpec,
    *,
    answered: int,
    seed: int,
    resamples: int = RESAMPLES,
) -> JudgeReport:
    """The judgements of a task's answers from its judge subtasks' ``rows``;
    ``answered``: its succeeded answers (each of which should have been judged)."""
    by_answer: defaultdict[int, list[JudgeVerdictRow]] = defaultdict(list)
    for row in rows:
        by_answer[row.judged_row_id].append(row)
    judgements: dict[int, AnswerJudgement] = {}
    units: list[int] = []
    for answer_id, rounds in sorted(by_answer.items()):
        rounds.sort(key=lambda r: r.judge_round)
        judgement = _judge_one(rounds, spec)
        judgements[answer_id] = judgement
        if judgement.score is not None:
            units.append(rounds[0].record_idx)
    judged = [j for j in judgements.values() if j.score is not None]
    metrics, uncertainty = _metrics(judged, units, spec, seed=seed, resamples=resamples)
    answered = max(answered, len(judged))
    if answered:
        metrics[COVERAGE] = len(judged) / answered
    return JudgeReport(metrics, uncertainty, judgements, len(judged), answered - len(judged))


def _judge_one(rounds: Sequence[JudgeVerdictRow], spec: JudgeSpec) -> AnswerJudgement:
    verdicts = [r for r in rounds if r.state is SubtaskState.SUCCEEDED and r.verdict is not None]
    if not verdicts:
        reasons = [r.error_reason for r in rounds if r.error_reason is not None]
        error = None
        if reasons:
            reason = reasons[-1]
            known = reason in ErrorReason.__members__.values()
            error = EvalError.of(
                ErrorReason(reason) if known else ErrorReason.INTERNAL_ERROR,
                f"no judging round gave a verdict (last: {reason})",
            )
        return AnswerJudgement(None, None, "", 0, None, error)
    scores = [float(r.verdict) for r in verdicts if r.verdict is not None]
    mean = sum(scores) / len(scores)
    if spec.score_format is JudgeScoreFormat.PASS_FAIL:
        passed = 2 * sum(1 for s in scores if s >= 1.0) > len(scores)
    else:
        passed = mean >= spec.threshold
    parsed = parse_verdict(verdicts[0].output or "", spec)
    return AnswerJudgement(
        score=mean,
        passed=passed,
        rationale="" if parsed is None else parsed.rationale,
        rounds=len(scores),
        agreed=None if len(scores) < 2 else len(set(scores)) == 1,
    )


def _metrics(
    judged: Sequence[AnswerJudgement],
    record_idxs: Sequence[int],
    spec: JudgeSpec,
    *,
    seed: int,
    resamples: int,
) -> tuple[dict[str, float], dict[str, MetricUncertainty]]:
    if not judged:
        return {}, {}
    passed = np.array([1.0 if j.passed else 0.0 for j in judged])
    scores = np.array([j.score for j in judged], dtype=np.float64)
    agreed_mask = np.array([j.agreed is not None for j in judged])
    agreed = np.array([1.0 if j.agreed else 0.0 for j in judged])
    columns: dict[str, tuple[np.ndarray, np.ndarray]] = {PASS_RATE: (passed, np.ones_like(passed))}
    if spec.score_format is JudgeScoreFormat.SCALE:
        columns[SCORE_MEAN] = (scores, np.ones_like(scores))
    if agreed_mask.any():
        columns[AGREEMENT] = (agreed * agreed_mask, agreed_mask.astype(np.float64))
    metrics = {name: float(num.sum() / den.sum()) for name, (num, den) in columns.items()}
    index: dict[int, int] = {}
    units = np.array([index.setdefault(i, len(index)) for i in record_idxs], dtype=np.intp)

    def statistic(weights: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        for name, (num, den) in columns.items():
            total = weights @ den
            out[name] = np.divide(weights @ num, total, out=np.zeros_like(total), where=total != 0)
        return out

    draws = bootstrap_distribution(units, len(index), statistic, seed=seed, resamples=resamples)
    uncertainty = {}
    for name, point in metrics.items():
        analytic = None
        if name != SCORE_MEAN:
            num, den = columns[name]
            analytic = wilson_interval(float(num.sum()), int(den.sum()))
        uncertainty[name] = MetricUncertainty(
            bootstrap=percentile_interval(draws[name], point, seed=seed, resamples=resamples),
            analytic=analytic,
        )
    return metrics, uncertainty
