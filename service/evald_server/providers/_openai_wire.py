"""The OpenAI chat-completions wire format: request bodies and response parsing.

Pure functions and one small accumulator for server-sent events, no I/O. A parse
problem raises ``MalformedResponse``; the adapter turns it into PROVIDER_BAD_RESPONSE.
The answer's usage, log-probabilities and text, streamed or not, are checked against
the model's bounds by ``_answer_bounds`` (one place for every provider): a value
outside them is dropped and flagged, never a failed call.
"""

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _json_string  # one str as JSON, not ASCII-escaped
from typing import Any

from evald_server.domain import FinishReason, ToolCall
from evald_server.providers._answer_bounds import (
    DEFAULT_BOUNDS,
    AnswerBounds,
    TopLogprobs,
    checked_plain_alternatives,
    checked_text,
    checked_usage,
)
from evald_server.providers._base import ProviderRequest
from evald_server.providers._logprobs import first_token_alternatives, logprob_fields
from evald_server.providers._tool_calls import (
    StreamedToolCalls,
    checked_tool_calls,
    tool_fields,
)


class MalformedResponse(Exception):
    """The body is not a well-formed chat completion (or completion chunk)."""


def chat_url(base_url: str) -> str:
    """``{base_url}/v1/chat/completions``, without doubling a trailing ``/v1``.

    ``http://h:8000`` and ``http://h:8000/v1`` (with or without a trailing slash) both
    give ``http://h:8000/v1/chat/completions``; a base URL with another path prefix
    (``https://gw/openai``) gets ``/v1/chat/completions`` appended to it.
    """
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        return f"{base}/chat/completions"
    return f"{base}/v1/chat/completions"


def completions_url(base_url: str) -> str:
    """``{base_url}/v1/completions``, by the same rule as ``chat_url``."""
    base = base_url.rstrip("/")
    return f"{base}/completions" if base.endswith("/v1") else f"{base}/v1/completions"


def request_body(
    model_name: str, request: ProviderRequest, *, stream: bool, schema_format: str = "prompt"
) -> bytes:
    """The JSON body; generation params are sent only when set (the engine merged them).

    Built from encoded strings rather than by ``json.dumps`` of a dict: the same bytes
    (``separators=(",", ":")``, ``ensure_ascii=False``, the keys in this order) at a
    fifth of the cost, which is paid once per model call. A record's tools and its
    JSON Schema (as ``response_format`` in the model's ``schema_format``, not for "prompt")
    come pre-encoded and are appended as they are."""
    messages = ",".join(
        f'{{"role":{_json_string(m.role)},"content":{_json_string(m.content)}}}'
        for m in request.messages
    )
    params = request.params
    options = _options(
        params.temperature,
        params.max_tokens,
        params.top_p,
        params.seed,
        params.stop,
        request.top_logprobs,
        stream,
    )
    extras = tool_fields(request.tools, request.tool_choice)
    if request.json_schema is not None:
        extras += _response_format(request.json_schema, schema_format)
    return (
        f'{{"model":{_json_string(model_name)},"messages":[{messages}]{options}{extras}}}'
    ).encode()


def _response_format(schema: str, schema_format: str) -> str:
    """``,"response_format":…`` asking for JSON following ``schema``: OpenAI's
    ``json_schema`` (under a fixed name, not strict: strict mode refuses schemas that
    leave properties optional), or ``json_object`` with a ``schema`` (llama-cpp-python);
    "" for "prompt"."""
    if schema_format == "json_schema":
        return (
            ',"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":'
            f"{schema}}}}}"
        )
    if schema_format == "json_object":
        return f',"response_format":{{"type":"json_object","schema":{schema}}}'
    return ""


@functools.lru_cache(maxsize=256)
def _options(
    temperature: float | None,
    max_tokens: int | None,
    top_p: float | None,
    seed: int | None,
    stop: tuple[str, ...],
    top_logprobs: int | None,
    stream: bool,
) -> str:
    """The body's fields after ``messages`` (``,"temperature":…`` or ""), in their order."""
    body: dict[str, Any] = {}
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if top_p is not None:
        body["top_p"] = top_p
    if seed is not None:
        body["seed"] = seed
    if stop:
        body["stop"] = list(stop)
    body.update(logprob_fields(top_logprobs))
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if not body:
        return ""
    return "," + json.dumps(body, separators=(",", ":"), ensure_ascii=False)[1:-1]


@dataclass(frozen=True, slots=True)
class ParsedCompletion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    finish_reason: FinishReason = FinishReason.UNKNOWN
    top_logprobs: TopLogprobs | None = None
    flags: tuple[str, ...] = ()  # what was out of bounds (``_answer_bounds``)
    tool_calls: tuple[ToolCall, ...] = ()  # ``_tool_calls``


def parse_completion(
    raw: bytes, *, max_answer_bytes: int | None = None, bounds: AnswerBounds = DEFAULT_BOUNDS
) -> ParsedCompletion:
    """``choices[0].message.content``, finish_reason and usage of a non-streamed answer."""
    data = _load_object(raw)
    choice = _first_choice(data.get("choices"))
    if choice is None:
        raise MalformedResponse("no choices[0]")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("choices[0] has no message")
    text, text_flags = checked_text(_content(message.get("content")))
    if max_answer_bytes is not None and len(text.encode()) > max_answer_bytes:
        raise AnswerTooLarge(max_answer_bytes)
    usage = checked_usage(data.get("usage"), bounds)
    reason = FinishReason.parse(choice.get("finish_reason"))
    alternatives, logprob_flags = first_token_alternatives(choice)
    calls, call_flags = checked_tool_calls(message.get("tool_calls"))
    return ParsedCompletion(
        text,
        usage.prompt_tokens,
        usage.completion_tokens,
        reason,
        alternatives,
        usage.flags + logprob_flags + text_flags + call_flags,
        calls,
    )


def plain_request_body(model_name: str, request: ProviderRequest) -> bytes:
    """The ``/v1/completions`` body of a plain prompt: ``prompt`` instead of messages,
    the same parameters; ``logprobs`` is the legacy API's count of alternatives."""
    assert request.prompt_text is not None
    params = request.params
    options = _options(
        params.temperature, params.max_tokens, params.top_p, params.seed, params.stop, None, False
    )
    logprobs = "" if request.top_logprobs is None else f',"logprobs":{request.top_logprobs}'
    prompt = _json_string(request.prompt_text)
    return f'{{"model":{_json_string(model_name)},"prompt":{prompt}{options}{logprobs}}}'.encode()


def parse_plain_completion(
    raw: bytes, *, max_answer_bytes: int | None = None, bounds: AnswerBounds = DEFAULT_BOUNDS
) -> ParsedCompletion:
    """``choices[0].text``, finish_reason, usage and the first token's alternatives of a
    ``/v1/completions`` answer."""
    data = _load_object(raw)
    choice = _first_choice(data.get("choices"))
    if choice is None:
        raise MalformedResponse("no choices[0]")
    text, text_flags = checked_text(_content(choice.get("text")))
    if max_answer_bytes is not None and len(text.encode()) > max_answer_bytes:
        raise AnswerTooLarge(max_answer_bytes)
    usage = checked_usage(data.get("usage"), bounds)
    alternatives, logprob_flags = checked_plain_alternatives(choice.get("logprobs"))
    return ParsedCompletion(
        text,
        usage.prompt_tokens,
        usage.completion_tokens,
        FinishReason.parse(choice.get("finish_reason")),
        alternatives,
        usage.flags + logprob_flags + text_flags,
    )


class AnswerTooLarge(MalformedResponse):
    """The answer's content exceeds the model's ``max_answer_bytes``."""

    def __init__(self, cap: int) -> None:
        super().__init__(f"answer content exceeds max_answer_bytes ({cap} bytes); reading stopped")
        self.cap = cap


def error_detail(raw: bytes, limit: int = 200, scrub: Callable[[str], str] = str) -> str:
    """A short, single-line excerpt of an error body (``error.message`` when present).

    ``scrub`` runs on the whole text *before* it is cut, so that a secret straddling
    the cut cannot leave a prefix behind.
    """
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"]
        elif isinstance(error, str):
            text = error
    text = scrub(" ".join(text.split()))
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


@dataclass(slots=True)
class StreamAccumulator:
    """Collects an SSE chat-completion stream line by line.

    ``feed`` returns ``True`` for a content delta that is not empty, so the caller can
    take the time to first token there; ``done`` is set by ``data: [DONE]``. The content
    kept is bounded by ``max_answer_bytes``: one byte more raises ``AnswerTooLarge``.

    A stream is an answer only once a choice carried a ``finish_reason``: llama.cpp's
    servers end a stream they interrupt (for the next request) with a bare ``[DONE]``,
    which is not the end of an answer but the loss of one.
    """

    max_answer_bytes: int | None = None
    bounds: AnswerBounds = DEFAULT_BOUNDS
    parts: list[str] = field(default_factory=list)
    content_bytes: int = 0
    events: int = 0  # data events other than [DONE]
    usage: object = None  # the last usage chunk's, checked once the stream ends
    finish_reason: FinishReason | None = None
    done: bool = False
    top_logprobs: TopLogprobs | None = None  # from the first chunk that has any
    logprob_flags: tuple[str, ...] = ()  # the first chunk with a block had an invalid one
    text_flags: tuple[str, ...] = ()
    tool_calls: StreamedToolCalls = field(default_factory=StreamedToolCalls)

    @property
    def finished(self) -> bool:
        """A choice carried a finish_reason."""
        return self.finish_reason is not None

    def feed(self, line: bytes) -> bool:
        line = line.strip()
        # Blank separators, ":" comments and event:/id:/retry: fields carry no data.
        if not line.startswith(b"data:"):
            return False
        payload = line[5:].strip()
        if payload == b"[DONE]":
            self.done = True
            return False
        chunk = _load_object(payload)
        self.events += 1
        if "error" in chunk:
            raise MalformedResponse(f"error event in stream: {error_detail(payload)}")
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        # The final usage chunk has an empty choices list.
        choice = _first_choice(chunk.get("choices"))
        if choice is None:
            return False
        if choice.get("finish_reason"):
            self.finish_reason = FinishReason.parse(choice["finish_reason"])
        if self.top_logprobs is None and not self.logprob_flags:
            self.top_logprobs, self.logprob_flags = first_token_alternatives(choice)
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return False
        if delta.get("tool_calls") is not None:
            self.tool_calls.feed(delta["tool_calls"])
            return True  # a call's first fragment is the first token of the answer
        content, repaired = checked_text(_content(delta.get("content")))
        if not content:
            return False
        self.text_flags = self.text_flags or repaired
        self.content_bytes += len(content.encode())
        if self.max_answer_bytes is not None and self.content_bytes > self.max_answer_bytes:
            raise AnswerTooLarge(self.max_answer_bytes)
        self.parts.append(content)
        return True

    def result(self) -> ParsedCompletion:
        """The answer, or ``MalformedResponse`` for a stream that did not finish one."""
        if self.events == 0:
            raise MalformedResponse(
                "stream had no chunks" + (" (only [DONE])" if self.done else "")
            )
        if self.finish_reason is None and self.done:
            raise MalformedResponse(
                f"stream ended with [DONE] but no finish_reason after {self.events} chunks "
                "(the provider interrupted the answer)"
            )
        if self.finish_reason is None:
            raise MalformedResponse(
                f"stream ended before [DONE] or a finish_reason after {self.events} chunks"
            )
        usage = checked_usage(self.usage, self.bounds)
        calls, call_flags = self.tool_calls.result()
        return ParsedCompletion(
            "".join(self.parts),
            usage.prompt_tokens,
            usage.completion_tokens,
            self.finish_reason,
            self.top_logprobs,
            usage.flags + self.logprob_flags + self.text_flags + call_flags,
            calls,
        )


def _load_object(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise MalformedResponse(f"invalid JSON ({exc.__class__.__name__})") from exc
    if not isinstance(data, dict):
        raise MalformedResponse(f"expected a JSON object, got {type(data).__name__}")
    return data


def _first_choice(choices: object) -> dict[str, Any] | None:
    if not choices:
        return None
    if not isinstance(choices, list) or not isinstance(choices[0], dict):
        raise MalformedResponse("choices is not a list of objects")
    return choices[0]


def _content(value: object) -> str:
    # null content is a legitimate empty answer (e.g. a reasoning model cut by max_tokens).
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedResponse(f"content is {type(value).__name__}, not a string")
    return value
