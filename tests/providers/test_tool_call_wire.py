"""Tool calls at the provider boundary: sent as the record gives them, read back within
named bounds, streamed or not; malformed arguments are a call's outcome, never an error."""

import json

from evald_server.config import GenerationParams
from evald_server.domain import ChatMessage, ToolCall, decode_tool_answer, encode_tool_answer
from evald_server.providers._base import ProviderRequest
from evald_server.providers._openai_wire import StreamAccumulator, parse_completion, request_body
from evald_server.providers._tool_calls import (
    MAX_ARGUMENTS_BYTES,
    MAX_TOOL_CALLS,
    checked_tool_calls,
)

TOOLS = '[{"type":"function","function":{"name":"f"}}]'


def _call(name: object, arguments: object) -> dict[str, object]:
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_the_request_carries_tools_choice_and_a_schema_only_when_the_model_honours_it() -> None:
    request = ProviderRequest(
        messages=(ChatMessage("user", "hi"),),
        params=GenerationParams(),
        request_key="k",
        tools=TOOLS,
        tool_choice='"required"',
        json_schema='{"type":"object"}',
    )
    plain = json.loads(request_body("m", request, stream=False))
    assert plain["tools"] == json.loads(TOOLS)
    assert plain["tool_choice"] == "required"
    assert "response_format" not in plain
    capable = json.loads(request_body("m", request, stream=False, schema_format="json_schema"))
    assert capable["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": {"type": "object"}},
    }
    llama = json.loads(request_body("m", request, stream=False, schema_format="json_object"))
    assert llama["response_format"] == {"type": "json_object", "schema": {"type": "object"}}
    bare = ProviderRequest(messages=request.messages, params=request.params, request_key="k")
    assert set(json.loads(request_body("m", bare, stream=False))) == {"model", "messages"}


def test_calls_are_parsed_and_malformed_arguments_kept_as_text() -> None:
    calls, flags = checked_tool_calls(
        [
            _call("f", '{"a": 1}'),
            _call("g", {"b": [1, 2]}),  # an object, as some servers send
            _call("h", '{"a": 1'),
            _call("i", "[1, 2]"),
            _call("j", ""),
        ]
    )
    assert flags == ()
    assert calls[0] == ToolCall("f", {"a": 1})
    assert calls[1] == ToolCall("g", {"b": [1, 2]})
    assert (calls[2].arguments, calls[2].arguments_text) == (None, '{"a": 1')
    assert calls[2].malformed.startswith("arguments are not JSON")
    assert calls[3].malformed == "arguments are a JSON array, not an object"
    assert calls[4].malformed.startswith("no arguments")


def test_out_of_bound_calls_are_cut_and_flagged() -> None:
    calls, flags = checked_tool_calls([_call("f", "{}")] * (MAX_TOOL_CALLS + 5))
    assert (len(calls), flags) == (MAX_TOOL_CALLS, ("tool_calls_truncated",))
    huge = json.dumps({"a": "x" * MAX_ARGUMENTS_BYTES})
    calls, flags = checked_tool_calls([_call("f", huge), _call(7, "{}"), _call("n" * 300, "{}")])
    assert flags == ("tool_call_invalid",)
    assert [c.arguments_text for c in calls] == ["", "", ""]  # never kept raw
    assert calls[0].malformed == f"arguments over {MAX_ARGUMENTS_BYTES} bytes"
    assert calls[1].name == calls[2].name == ""
    deep = "[" * 10_000 + "]" * 10_000
    (call,), _ = checked_tool_calls([_call("f", '{"a": ' + deep + "}")])
    assert "nested deeper" in call.malformed
    assert checked_tool_calls("not a list") == ((), ("tool_calls_invalid",))
    assert checked_tool_calls(None) == ((), ())


def test_a_completion_and_a_stream_give_the_same_calls() -> None:
    wire = [_call("f", '{"city": "Oslo"}'), _call("g", '{"n": 2}')]
    body = {
        "choices": [
            {
                "message": {"role": "assistant", "content": None, "tool_calls": wire},
                "finish_reason": "tool_calls",
            }
        ]
    }
    parsed = parse_completion(json.dumps(body).encode())
    stream = StreamAccumulator()
    head = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}'
    stream.feed(head)
    for index, item in enumerate(wire):
        arguments = item["function"]["arguments"]  # type: ignore[index]
        first = {
            **item,
            "index": index,
            "function": {"name": item["function"]["name"], "arguments": arguments[:5]},
        }  # type: ignore[index]
        rest = {"index": index, "function": {"arguments": arguments[5:]}}
        for fragment in (first, rest):
            event = {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}
            assert stream.feed(b"data: " + json.dumps(event).encode())
    stream.feed(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}')
    streamed = stream.result()
    assert parsed.tool_calls == streamed.tool_calls
    assert parsed.tool_calls == (ToolCall("f", {"city": "Oslo"}), ToolCall("g", {"n": 2}))


def test_the_stored_answer_round_trips() -> None:
    calls = (ToolCall("f", {"a": "é"}), ToolCall("g", None, "{oops", "arguments are not JSON"))
    content, decoded = decode_tool_answer(encode_tool_answer("text", calls))
    assert (content, decoded) == ("text", calls)


def test_a_stream_that_repeats_the_name_in_every_fragment_keeps_it_once() -> None:
    # llama-cpp-python 0.3.36 sends the whole name with every arguments fragment.
    stream = StreamAccumulator()
    for piece in ('{"city": ', '"Oslo"}'):
        fragment = {
            "index": 0,
            "id": "c",
            "type": "function",
            "function": {"name": "f", "arguments": piece},
        }
        stream.feed(
            b"data: "
            + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}).encode()
        )
    stream.feed(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}')
    assert stream.result().tool_calls == (ToolCall("f", {"city": "Oslo"}),)
