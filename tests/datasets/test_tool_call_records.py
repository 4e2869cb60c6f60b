"""Tool-call records: tools and expected calls checked at upload, hostile ones refused
with the line, the field and the problem named."""

import json
from typing import Any

import pytest

from evald_server.datasets import expected_text, parse_jsonl, request_extras
from evald_server.domain import DatasetInvalid, ErrorReason, TaskType

LIMITS = {"max_records": 100, "max_record_bytes": 1 << 20}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    },
}


def record(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "input": "Weather in Oslo?",
        "tools": [WEATHER],
        "expected_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
    }
    return {**base, **changes}


def parse(*records: object) -> Any:
    data = ("\n".join(json.dumps(r) for r in records) + "\n").encode()
    return parse_jsonl(TaskType.TOOL_CALL, [data], **LIMITS)


def refused(rec: dict[str, Any]) -> DatasetInvalid:
    with pytest.raises(DatasetInvalid) as caught:
        parse(rec)
    assert caught.value.reason is ErrorReason.DATASET_FIELD_INVALID
    assert caught.value.message.startswith("line 1")
    return caught.value


def test_a_valid_record_keeps_its_tools_and_sends_them_as_given() -> None:
    parsed = parse(record(tool_choice={"type": "function", "function": {"name": "get_weather"}}))
    fields = parsed.records[0].fields
    extras = request_extras(TaskType.TOOL_CALL, fields)
    assert json.loads(extras.tools or "") == [WEATHER]
    assert json.loads(extras.tool_choice or "") == {
        "type": "function",
        "function": {"name": "get_weather"},
    }
    assert json.loads(expected_text(TaskType.TOOL_CALL, fields)) == fields["expected_calls"]


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"tools": [{**WEATHER, "function": {"name": "get weather!"}}]}, "is not 1-64 of"),
        ({"tools": [WEATHER, WEATHER]}, "'get_weather' is offered twice"),
        ({"expected_calls": [{"name": "get_time"}]}, "'get_time' is not one of the tools"),
        (
            {"expected_calls": [{"name": "get_weather", "arguments": {"days": "three"}}]},
            "field 'expected_calls[0].arguments.days': 'three' does not fit the parameter's schema",
        ),
        (
            {
                "expected_calls": [
                    {
                        "name": "get_weather",
                        "arguments": {"days": 3},
                        "alternatives": {"city": ["Oslo"]},
                    }
                ]
            },
            "alternatives.city': no expected value in arguments",
        ),
        (
            {"tools": [{**WEATHER, "function": {"name": "f", "parameters": {"type": "array"}}}]},
            "parameters.type: must be 'object'",
        ),
        (
            {
                "tools": [
                    {
                        **WEATHER,
                        "function": {
                            "name": "f",
                            "parameters": {"$ref": "https://example.com/schema.json"},
                        },
                    }
                ]
            },
            "refers outside the schema; evald never fetches a schema",
        ),
        ({"tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": []}, "tools"),
    ],
)
def test_hostile_or_inconsistent_tools_are_refused(changes: dict[str, Any], fragment: str) -> None:
    error = refused(record(**changes))
    assert fragment in error.message, error.message


def test_tool_and_expected_call_counts_are_bounded() -> None:
    many = [{**WEATHER, "function": {"name": f"f{i}"}} for i in range(65)]
    assert "tools" in refused(record(tools=many)).message
    calls = [{"name": "get_weather"}] * 17
    assert "expected_calls" in refused(record(expected_calls=calls)).message
