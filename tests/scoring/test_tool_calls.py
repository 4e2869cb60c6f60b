"""The tool-call scorer and its matching rules, against values worked out by hand."""

from typing import Any

import pytest

from evald_server.domain import TaskType, ToolCall, encode_tool_answer
from evald_server.scoring import ScoringSample, ToolCallPayload, score_task
from evald_server.scoring._call_matching import compare_call, matched_pairs, values_match


@pytest.mark.parametrize(
    ("made", "expected", "schema", "match"),
    [
        (3, 3.0, None, True),
        (3.0000000001, 3, None, True),
        ("3", 3, None, False),
        (True, 1, None, False),
        (1, True, None, False),
        ("  New   York ", "new york", None, True),
        ("ＡＢＣ", "abc", None, True),  # NFKC folds full-width letters
        (["b", "a"], ["a", "b"], None, False),
        (["b", "a"], ["a", "b"], {"type": "array", "uniqueItems": True}, True),
        (["a", "a"], ["a", "b"], {"uniqueItems": True}, False),
        ({"x": [2, 1]}, {"x": [1, 2]}, {"properties": {"x": {"uniqueItems": True}}}, True),
        ({"x": 1, "y": 2}, {"x": 1}, None, False),
        (None, None, None, True),
    ],
)
def test_values_match_by_type(made: Any, expected: Any, schema: Any, match: bool) -> None:
    assert values_match(made, expected, schema) is match


def test_a_call_matches_with_alternatives_and_optional_arguments() -> None:
    want = {
        "name": "f",
        "arguments": {"unit": "c", "city": "Oslo"},
        "alternatives": {"unit": ["celsius", None]},
    }
    assert compare_call(ToolCall("f", {"city": "oslo"}), want, {}).exact
    assert compare_call(ToolCall("f", {"city": "oslo", "unit": "Celsius"}), want, {}).exact
    extra = compare_call(ToolCall("f", {"city": "oslo", "zone": 1}), want, {})
    assert (extra.exact, extra.arguments_matched) == (False, 2)
    typed = compare_call(ToolCall("f", {"city": 7}), want, {})
    assert (typed.exact, typed.arguments_matched, typed.wrong_type) == (False, 1, True)
    assert not compare_call(ToolCall("g", {"city": "Oslo"}), want, {}).exact
    assert not compare_call(ToolCall("f", None, "{", "bad"), want, {}).exact


def test_pairs_are_matched_one_to_one() -> None:
    # Made call 0 matches expected 0 and 1, made call 1 only expected 0: both pair up.
    assert matched_pairs([[True, True], [True, False]]) == 2
    assert matched_pairs([[True, True], [False, False]]) == 1
    assert matched_pairs([]) == 0


def _sample(
    index: int, calls: tuple[ToolCall, ...], expected: list[dict[str, Any]]
) -> ScoringSample:
    record = {"input": "q", "tools": [], "expected_calls": expected}
    return ScoringSample(f"s{index}", f"r{index}", 0, record, encode_tool_answer("", calls))


def test_report_metrics_intervals_and_payload() -> None:
    want = [{"name": "f", "arguments": {"a": 1}}]
    samples = [
        _sample(0, (ToolCall("f", {"a": 1}),), want),  # exact
        _sample(1, (ToolCall("f", {"a": 2}), ToolCall("g", {})), want),  # wrong value + extra
        _sample(2, (), want),  # no call
        ScoringSample("s3", "r3", 0, {"input": "q", "tools": [], "expected_calls": want}, None),
    ]
    report = score_task(TaskType.TOOL_CALL, samples, resamples=200)
    assert (report.scored_samples, report.skipped_samples) == (3, 1)
    assert report.metrics["exact_match"] == pytest.approx(1 / 3)
    assert report.metrics["argument_accuracy"] == pytest.approx(1 / 3)
    assert report.metrics["call_precision"] == pytest.approx(1 / 3)  # 1 matched of 3 made
    assert report.metrics["call_recall"] == pytest.approx(1 / 3)  # of 3 expected
    assert report.metrics["call_f1"] == pytest.approx(1 / 3)
    for name, uncertainty in report.uncertainty.items():
        assert uncertainty.bootstrap.lower <= report.metrics[name] <= uncertainty.bootstrap.upper
    assert report.uncertainty["exact_match"].analytic is not None
    payload = report.payload
    assert isinstance(payload, ToolCallPayload)
    assert (payload.no_call, payload.wrong_name, payload.extra_calls) == (1, 1, 1)
    assert (payload.calls_made, payload.calls_expected) == (3, 3)
    flags = {s.subtask_id: s.flags for s in report.sample_scores}
    assert flags == {
        "s0": (),
        "s1": ("wrong_name", "extra_calls"),
        "s2": ("no_call", "missing_call"),
    }


def test_text_where_calls_were_due_is_no_call() -> None:
    record = {"input": "q", "tools": [], "expected_calls": [{"name": "f"}]}
    report = score_task(TaskType.TOOL_CALL, [ScoringSample("s", "r", 0, record, "just text")])
    assert report.metrics["exact_match"] == 0.0
    assert report.sample_scores[0].flags == ("no_call", "missing_call")
