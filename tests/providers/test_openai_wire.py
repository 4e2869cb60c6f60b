"""Request bodies, the base-URL rule and response parsing of the OpenAI wire format."""

import json

import pytest

from evald_server.config import GenerationParams
from evald_server.providers import ChatMessage, ProviderRequest, chat_url
from evald_server.providers._openai_wire import (
    MalformedResponse,
    StreamAccumulator,
    error_detail,
    parse_completion,
    request_body,
)


@pytest.mark.parametrize(
    "base",
    ["http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/"],
)
def test_chat_url_never_doubles_v1(base: str) -> None:
    assert chat_url(base) == "http://h:8000/v1/chat/completions"


def test_chat_url_keeps_a_path_prefix() -> None:
    assert chat_url("https://gw/openai") == "https://gw/openai/v1/chat/completions"
    assert chat_url("https://gw/openai/v1") == "https://gw/openai/v1/chat/completions"


def _request(params: GenerationParams) -> ProviderRequest:
    return ProviderRequest(
        (ChatMessage("system", "be brief"), ChatMessage("user", "héllo")), params, "sub-1"
    )


def test_body_sends_only_the_params_that_are_set() -> None:
    body = json.loads(request_body("llama", _request(GenerationParams()), stream=False))
    assert body == {
        "model": "llama",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "héllo"},
        ],
    }
    params = GenerationParams(temperature=0.0, max_tokens=16, top_p=0.5, seed=7, stop=("\n",))
    body = json.loads(request_body("llama", _request(params), stream=True))
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 16
    assert body["top_p"] == 0.5
    assert body["seed"] == 7
    assert body["stop"] == ["\n"]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_parse_completion() -> None:
    raw = json.dumps(
        {
            "choices": [{"message": {"role": "assistant", "content": "Paris"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 1},
        }
    ).encode()
    parsed = parse_completion(raw)
    assert (parsed.text, parsed.prompt_tokens, parsed.completion_tokens) == ("Paris", 12, 1)


def test_parse_completion_tolerates_null_content_and_missing_usage() -> None:
    parsed = parse_completion(b'{"choices": [{"message": {"content": null}}]}')
    assert (parsed.text, parsed.prompt_tokens, parsed.completion_tokens) == ("", None, None)
    parsed = parse_completion(
        b'{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": true}}'
    )
    assert parsed.prompt_tokens is None


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'{"choices": []}',
        b'{"choices": [1]}',
        b'{"choices": [{"text": "legacy"}]}',
        b'{"choices": [{"message": {"content": 3}}]}',
        b"\xff\xfe",
    ],
)
def test_malformed_completions(raw: bytes) -> None:
    with pytest.raises(MalformedResponse):
        parse_completion(raw)


def _event(data: object) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n"


def test_stream_accumulator() -> None:
    stream = StreamAccumulator()
    firsts = [
        stream.feed(line)
        for line in [
            b": keep-alive comment\n",
            b"event: message\n",
            _event({"choices": [{"delta": {"role": "assistant", "content": ""}}]}),
            b"\n",
            _event({"choices": [{"delta": {"content": "Hel"}}]}),
            _event({"choices": [{"delta": {"content": "lo"}, "finish_reason": None}]}),
            _event({"choices": [{"delta": {}, "finish_reason": "stop"}]}),
            _event({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
            b"data: [DONE]\n",
        ]
    ]
    assert firsts == [False, False, False, False, True, True, False, False, False]
    assert stream.done
    parsed = stream.result()
    assert (parsed.text, parsed.prompt_tokens, parsed.completion_tokens) == ("Hello", 3, 2)


def test_stream_without_done_but_with_finish_reason_is_complete() -> None:
    stream = StreamAccumulator()
    stream.feed(_event({"choices": [{"delta": {"content": "ok"}, "finish_reason": "length"}]}))
    assert stream.result().text == "ok"


def test_stream_cut_short_or_broken_is_malformed() -> None:
    stream = StreamAccumulator()
    stream.feed(_event({"choices": [{"delta": {"content": "half"}}]}))
    with pytest.raises(MalformedResponse, match="before"):
        stream.result()
    with pytest.raises(MalformedResponse, match="invalid JSON"):
        StreamAccumulator().feed(b'data: {"choices": [\n')
    with pytest.raises(MalformedResponse, match="overloaded"):
        StreamAccumulator().feed(_event({"error": {"message": "overloaded"}}))


def test_error_detail_prefers_error_message_and_is_short() -> None:
    assert error_detail(b'{"error": {"message": "model  not\\nfound"}}') == "model not found"
    assert error_detail(b'{"error": "nope"}') == "nope"
    long = error_detail(b"x" * 1000)
    assert len(long) == 200
    assert long.endswith("…")
