"""The OpenAI chat-completions wire format: request bodies and response parsing.

Pure functions and one small accumulator for server-sent events, no I/O. A parse
problem raises ``MalformedResponse``; the adapter turns it into PROVIDER_BAD_RESPONSE.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from evald_server.providers._base import ProviderRequest
from evald_server.providers._logprobs import TopLogprobs, first_token_alternatives, logprob_fields


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


def request_body(model_name: str, request: ProviderRequest, *, stream: bool) -> bytes:
    """The JSON body; generation params are sent only when set (the engine merged them)."""
    params = request.params
    body: dict[str, Any] = {
        "model": model_name,
        "messages": [{"role": m.role, "content": m.content} for m in request.messages],
    }
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.max_tokens is not None:
        body["max_tokens"] = params.max_tokens
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop:
        body["stop"] = list(params.stop)
    body.update(logprob_fields(request.top_logprobs))
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class ParsedCompletion:
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    top_logprobs: TopLogprobs | None = None


def parse_completion(raw: bytes) -> ParsedCompletion:
    """``choices[0].message.content`` and the usage counts of a non-streamed answer."""
    data = _load_object(raw)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedResponse("no choices[0]")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise MalformedResponse("choices[0] has no message")
    prompt_tokens, completion_tokens = _usage(data.get("usage"))
    return ParsedCompletion(
        _content(message.get("content")),
        prompt_tokens,
        completion_tokens,
        first_token_alternatives(choices[0]),
    )


def error_detail(raw: bytes, limit: int = 200) -> str:
    """A short, single-line excerpt of an error body (``error.message`` when present)."""
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
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


@dataclass(slots=True)
class StreamAccumulator:
    """Collects an SSE chat-completion stream line by line.

    ``feed`` returns ``True`` for a content delta that is not empty, so the caller can
    take the time to first token there; ``done`` is set by ``data: [DONE]``.
    """

    parts: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finished: bool = False  # a choice carried a finish_reason
    done: bool = False
    top_logprobs: TopLogprobs | None = None  # from the first chunk that has any

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
        if "error" in chunk:
            raise MalformedResponse(f"error event in stream: {error_detail(payload)}")
        if chunk.get("usage") is not None:
            self.prompt_tokens, self.completion_tokens = _usage(chunk["usage"])
        choices = chunk.get("choices")
        if not choices:
            return False  # the final usage chunk has an empty choices list
        if not isinstance(choices, list) or not isinstance(choices[0], dict):
            raise MalformedResponse("chunk choices is not a list of objects")
        if choices[0].get("finish_reason"):
            self.finished = True
        if self.top_logprobs is None:
            self.top_logprobs = first_token_alternatives(choices[0])
        delta = choices[0].get("delta")
        if not isinstance(delta, dict):
            return False
        content = _content(delta.get("content"))
        if content:
            self.parts.append(content)
            return True
        return False

    def result(self) -> ParsedCompletion:
        if not (self.done or self.finished):
            raise MalformedResponse("stream ended before [DONE] or a finish_reason")
        return ParsedCompletion(
            "".join(self.parts), self.prompt_tokens, self.completion_tokens, self.top_logprobs
        )


def _load_object(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise MalformedResponse(f"invalid JSON ({exc.__class__.__name__})") from exc
    if not isinstance(data, dict):
        raise MalformedResponse(f"expected a JSON object, got {type(data).__name__}")
    return data


def _content(value: object) -> str:
    # null content is a legitimate empty answer (e.g. a reasoning model cut by max_tokens).
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedResponse(f"content is {type(value).__name__}, not a string")
    return value


def _usage(usage: object) -> tuple[int | None, int | None]:
    if not isinstance(usage, dict):
        return None, None
    return _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))


def _count(value: object) -> int | None:
    # bool is an int subclass; a count of True is nonsense, so it is dropped too.
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None
