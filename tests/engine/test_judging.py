"""Pure parts of model-graded scoring: the strict verdict parser, the rubric's
rendering, the aggregation of judging rounds and the lifecycle rule that creates
judge subtasks."""

import pytest

from evald_server.datasets import ChatPrompt
from evald_server.domain import (
    JudgeScoreFormat,
    OutcomeKind,
    SubtaskPhase,
    SubtaskState,
    TaskType,
    judge_subtasks_due,
)
from evald_server.engine import JudgeSpec
from evald_server.engine._judge_results import judge_answers
from evald_server.engine._judging import JudgePrompt, parse_verdict
from evald_server.store import JudgeVerdictRow

PASS_FAIL = JudgeSpec(model_id="j")
SCALE = JudgeSpec(model_id="j", score_format=JudgeScoreFormat.SCALE, scale_min=1, scale_max=5)


@pytest.mark.parametrize(
    ("text", "score", "rationale"),
    [
        ("Looks right.\nVERDICT: PASS", 1.0, "Looks right."),
        ("Wrong city.\n\nverdict: fail\n", 0.0, "Wrong city."),
        ("VERDICT:PASS", 1.0, ""),
        ("  Reasoning\n  more\nVERDICT: FAIL  ", 0.0, "Reasoning\nmore"),
    ],
)
def test_a_pass_fail_verdict_is_the_last_line(text: str, score: float, rationale: str) -> None:
    verdict = parse_verdict(text, PASS_FAIL)
    assert verdict is not None
    assert (verdict.score, verdict.rationale) == (score, rationale)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "It passes.",
        "VERDICT: PASS\nbecause it is right",  # not the last line
        "VERDICT: MAYBE",
        "VERDICT: PASS\nVERDICT: FAIL",  # two verdicts: ambiguous
        "I'd say VERDICT: PASS",  # not a line of its own
        "**VERDICT: PASS**",
        "SCORE: 5",  # the other format
    ],
)
def test_anything_else_is_unparseable(text: str) -> None:
    assert parse_verdict(text, PASS_FAIL) is None


def test_a_score_must_lie_on_the_scale() -> None:
    assert parse_verdict("ok\nSCORE: 4", SCALE).score == 4.0  # type: ignore[union-attr]
    assert parse_verdict("SCORE: 1", SCALE).score == 1.0  # type: ignore[union-attr]
    for text in ("SCORE: 0", "SCORE: 6", "SCORE: 4.5", "SCORE: four", "VERDICT: PASS"):
        assert parse_verdict(text, SCALE) is None, text


def test_the_rubric_is_rendered_once_with_the_format_instruction_appended() -> None:
    spec = JudgeSpec(model_id="j", rubric="In: {input}\nRef: {reference}\nOut: {output} {x}")
    prompt = JudgePrompt(
        spec, TaskType.GENERATION, ChatPrompt(TaskType.GENERATION, template="Q: {input}")
    )
    fields = {"input": "2+2?", "reference": "4"}
    (message,) = prompt.render(fields, "r1", "{reference} is 5")
    assert message.role == "user"
    # A placeholder inside the answer is not expanded; an unknown one is left as it is
    # (the spec refuses those before a run is accepted).
    assert message.content.startswith("In: Q: 2+2?\nRef: 4\nOut: {reference} is 5 {x}")
    assert message.content.endswith("exactly VERDICT: PASS or VERDICT: FAIL.")


def test_the_spec_refuses_unknown_placeholders_and_a_rubric_without_the_answer() -> None:
    problems = JudgeSpec(model_id="j", rubric="Is {answer} right?").problems()
    assert [name for name, _ in problems] == ["judge.rubric", "judge.rubric"]
    assert "unknown placeholder(s) {answer}" in problems[0][1]
    problems = dict(JudgeSpec(model_id="j", rubric="Grade it.").problems())
    assert problems == {"judge.rubric": "must show the answer: {output}"}
    bad_scale = JudgeSpec(
        model_id="j", score_format=JudgeScoreFormat.SCALE, scale_min=5, scale_max=5
    )
    assert [name for name, _ in bad_scale.problems()] == ["judge.scale_max"]
    assert [n for n, _ in JudgeSpec(model_id="j", rounds=0).problems()] == ["judge.rounds"]


def _row(
    answer: int, judge_round: int, verdict: float | None, *, record: int = 0
) -> JudgeVerdictRow:
    state = SubtaskState.SUCCEEDED if verdict is not None else SubtaskState.FAILED_PERMANENT
    text = None if verdict is None else f"why {answer}.{judge_round}\nVERDICT: PASS"
    reason = None if verdict is not None else "judge_verdict_unparseable"
    return JudgeVerdictRow(
        100 * answer + judge_round, answer, record, judge_round, state, verdict, text, reason
    )


def test_rounds_are_aggregated_by_majority_and_agreement_is_counted() -> None:
    rows = [
        *(_row(1, r, 1.0, record=1) for r in range(3)),  # pass, pass, pass: agree
        _row(2, 0, 1.0, record=2),
        _row(2, 1, 0.0, record=2),
        _row(2, 2, 1.0, record=2),  # 2 of 3 pass: passes, disagree
        _row(3, 0, 1.0, record=3),
        _row(3, 1, 0.0, record=3),  # a tie fails
        _row(3, 2, None, record=3),
        *(_row(4, r, None, record=4) for r in range(3)),  # no verdict at all
    ]
    report = judge_answers(rows, JudgeSpec(model_id="j", rounds=3), seed=1, resamples=200)
    by_answer = report.judgements
    assert [by_answer[a].passed for a in (1, 2, 3, 4)] == [True, True, False, None]
    assert [by_answer[a].agreed for a in (1, 2, 3, 4)] == [True, False, False, None]
    assert by_answer[1].rationale == "why 1.0"
    assert by_answer[4].error is not None
    assert by_answer[4].error.reason.value == "judge_verdict_unparseable"
    assert (report.judged, report.unjudged) == (3, 1)
    assert report.metrics == {"judge_pass_rate": 2 / 3, "judge_agreement_rate": 1 / 3}
    for name, point in report.metrics.items():
        interval = report.uncertainty[name]
        assert interval.bootstrap.lower <= point <= interval.bootstrap.upper
        assert interval.analytic is not None


def test_a_scale_reports_the_mean_score_and_passes_at_the_threshold() -> None:
    spec = JudgeSpec(
        model_id="j",
        score_format=JudgeScoreFormat.SCALE,
        scale_min=1,
        scale_max=5,
        pass_threshold=4,
    )
    rows = [_row(a, 0, float(s), record=a) for a, s in ((1, 5), (2, 4), (3, 3), (4, 1))]
    report = judge_answers(rows, spec, seed=0, resamples=100)
    assert report.metrics["judge_score_mean"] == 13 / 4
    assert report.metrics["judge_pass_rate"] == 2 / 4
    assert "judge_agreement_rate" not in report.metrics, "one round: nothing to agree on"


def test_judge_subtasks_are_due_for_succeeded_answers_of_live_runs_only() -> None:
    answer, judge = SubtaskPhase.ANSWER, SubtaskPhase.JUDGE
    assert judge_subtasks_due(OutcomeKind.SUCCEEDED, answer, 3, cancel_requested=False) == 3
    assert judge_subtasks_due(OutcomeKind.SUCCEEDED, answer, 0, cancel_requested=False) == 0
    assert judge_subtasks_due(OutcomeKind.SUCCEEDED, judge, 3, cancel_requested=False) == 0
    assert judge_subtasks_due(OutcomeKind.SUCCEEDED, answer, 3, cancel_requested=True) == 0
    for kind in (OutcomeKind.RETRY, OutcomeKind.FAILED_PERMANENT, OutcomeKind.CANCELLED):
        assert judge_subtasks_due(kind, answer, 3, cancel_requested=False) == 0
