"""OpenAI-shaped response bodies for the fake: completions, SSE chunks, errors."""

import email.utils
import json
import re
import time
from collections.abc import Iterator
from typing import Any

_PIECES = re.compile(r"\S+\s*|\s+")
_HTTP_REASONS = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit"}


def _dumps(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()


def tokens(text: str) -> int:
    """A whitespace token estimate: the fake's notion of usage."""
    return len(text.split())


# The fake's hottest path: a template filled with json.dumps'd strings (a third of the
# cost of dumping the whole dict), so the fake stays cheaper per request than any client.
_COMPLETION = (
    '{"id":"chatcmpl-fake-%d","object":"chat.completion","created":%d,"model":%s,'
    '"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}'
)


def completion_body(
    seq: int, model: str, text: str, prompt_tokens: int, logprobs: dict[str, Any] | None = None
) -> bytes:
    completion_tokens = tokens(text)
    if logprobs is not None:  # off the hot path: only requests that ask for them
        body = json.loads(completion_body(seq, model, text, prompt_tokens))
        body["choices"][0]["logprobs"] = logprobs
        return _dumps(body)
    return (
        _COMPLETION
        % (
            seq,
            int(time.time()),
            json.dumps(model, ensure_ascii=False),
            json.dumps(text, ensure_ascii=False),
            prompt_tokens,
            completion_tokens,
            prompt_tokens + completion_tokens,
        )
    ).encode()


def stream_events(
    seq: int,
    model: str,
    text: str,
    prompt_tokens: int,
    *,
    include_usage: bool,
    logprobs: dict[str, Any] | None = None,
) -> Iterator[bytes]:
    """The SSE events of a streamed completion: role, content pieces, stop, usage, [DONE]."""
    head = {"id": f"chatcmpl-fake-{seq}", "object": "chat.completion.chunk", "model": model}

    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + _dumps({**head, "choices": choices, **extra}) + b"\n\n"

    yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
    for index, piece in enumerate(_PIECES.findall(text)):
        choice: dict[str, Any] = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
        if index == 0 and logprobs is not None:  # the first token's, on its chunk
            choice["logprobs"] = logprobs
        yield event([choice])
    yield event([{"index": 0, "delta": {}, "finish_reason": "stop"}])
    if include_usage:
        completion_tokens = tokens(text)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        yield event([], usage=usage)
    yield b"data: [DONE]\n\n"


MALFORMED_BODY = b'{"id": "chatcmpl-fake", "object": "chat.completion", "choices": [{"mess'
MALFORMED_EVENT = b'data: {"choices": [{"delta": {"content": "tru\n\n'


def error_body(status: int, message: str) -> bytes:
    kind = _HTTP_REASONS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return _dumps({"error": {"message": message, "type": kind, "code": status}})


def retry_headers(
    retry_after_s: float | None, retry_after_ms: float | None, *, http_date: bool
) -> dict[str, str]:
    headers: dict[str, str] = {}
    if retry_after_s is not None:
        if http_date:
            headers["Retry-After"] = email.utils.formatdate(
                time.time() + retry_after_s, usegmt=True
            )
        else:
            headers["Retry-After"] = f"{retry_after_s:g}"
    if retry_after_ms is not None:
        headers["retry-after-ms"] = f"{retry_after_ms:g}"
    return headers
