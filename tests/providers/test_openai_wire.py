"""Request bodies, the base-URL rule and response parsing of the OpenAI wire format."""

import json

import pytest

from evald_server.config import GenerationParams
from evald_server.domain import ChatMessage, FinishReason
from evald_server.providers import ProviderRequest, chat_url
from evald_server.providers._openai_wire import (
    AnswerTooLarge,
    MalformedResponse,
    StreamAccumulator,
    error_detail,
    parse_completion,
    request_body,
)
from evald_server.providers._scrub import SecretScrubber


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


def _dumped(model: str, request: ProviderRequest, *, stream: bool) -> bytes:
    """The body as ``json.dumps`` writes the dict it stands for."""
    params = request.params
    body: dict[str, object] = {
        "model": model,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
    }
    for name in ("temperature", "max_tokens", "top_p", "seed"):
        if getattr(params, name) is not None:
            body[name] = getattr(params, name)
    if params.stop:
        body["stop"] = list(params.stop)
    if request.top_logprobs is not None:
        body.update(logprobs=True, top_logprobs=request.top_logprobs)
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    "params",
    [
        GenerationParams(),
        GenerationParams(temperature=0.7),
        GenerationParams(temperature=0.0, max_tokens=16, top_p=0.5, seed=7, stop=("\n", '"')),
        GenerationParams(seed=-3, stop=("END",)),
    ],
)
@pytest.mark.parametrize("top_logprobs", [None, 5])
def test_the_body_is_the_bytes_json_dumps_writes(
    params: GenerationParams, stream: bool, top_logprobs: int | None
) -> None:
    texts = ['quote " back\\slash', "tab\tnew\nline \x00\x1f", "héllo ✓ 𝄞 \u2028", ""]
    messages = tuple(ChatMessage(role, text) for role in ("system", "user") for text in texts)
    request = ProviderRequest(messages, params, "sub-1", top_logprobs=top_logprobs)
    for model in ("llama", 'odd "name"/ü'):
        assert request_body(model, request, stream=stream) == _dumped(model, request, stream=stream)


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


def test_done_without_finish_reason_is_an_interrupted_answer_not_an_empty_one() -> None:
    # llama-cpp-python ends a stream it interrupts for the next request like this.
    stream = StreamAccumulator()
    stream.feed(_event({"choices": [{"delta": {"role": "assistant", "content": ""}}]}))
    stream.feed(b"data: [DONE]\n")
    with pytest.raises(MalformedResponse, match=r"\[DONE\] but no finish_reason after 1 chunks"):
        stream.result()


def test_a_stream_with_no_chunks_is_malformed() -> None:
    only_done = StreamAccumulator()
    only_done.feed(b"data: [DONE]\n")
    with pytest.raises(MalformedResponse, match=r"no chunks \(only \[DONE\]\)"):
        only_done.result()
    with pytest.raises(MalformedResponse, match=r"no chunks$"):
        StreamAccumulator().result()


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("content_filter", FinishReason.CONTENT_FILTER),
        ("tool_calls", FinishReason.TOOL_CALLS),
        ("function_call", FinishReason.TOOL_CALLS),
        ("eos", FinishReason.UNKNOWN),
        (None, FinishReason.UNKNOWN),
        (3, FinishReason.UNKNOWN),
    ],
)
def test_finish_reason_is_read_from_streams_and_bodies(raw: object, expected: FinishReason) -> None:
    body = {"choices": [{"message": {"content": "x"}, "finish_reason": raw}]}
    assert parse_completion(json.dumps(body).encode()).finish_reason is expected
    if raw is not None:
        stream = StreamAccumulator()
        stream.feed(_event({"choices": [{"delta": {"content": "x"}, "finish_reason": raw}]}))
        assert stream.result().finish_reason is expected


def test_answer_cap_stops_streams_and_bodies_at_one_byte_over() -> None:
    stream = StreamAccumulator(max_answer_bytes=10)
    stream.feed(_event({"choices": [{"delta": {"content": "é" * 5}}]}))  # 10 bytes: at the cap
    with pytest.raises(AnswerTooLarge, match=r"max_answer_bytes \(10 bytes\)"):
        stream.feed(_event({"choices": [{"delta": {"content": "x"}}]}))
    assert stream.content_bytes == 11
    assert stream.parts == ["é" * 5]  # the overflow is not kept
    at_cap = json.dumps({"choices": [{"message": {"content": "x" * 10}}]}).encode()
    assert parse_completion(at_cap, max_answer_bytes=10).text == "x" * 10
    with pytest.raises(AnswerTooLarge):
        parse_completion(at_cap, max_answer_bytes=9)


def test_error_detail_scrubs_before_it_cuts() -> None:
    secret = "sk-" + "A1b2C3d4" * 5
    body = ("x" * 180 + secret).encode()
    cut_first = error_detail(body)
    assert secret[:15] in cut_first  # what cutting first leaves behind
    scrubbed = error_detail(body, scrub=SecretScrubber([secret]))
    assert "A1b2C3d4"[:8].lower() not in scrubbed.lower()
    assert scrubbed.endswith("<redacted>")
