"""OpenAI-shaped response bodies for the fake: completions, SSE chunks, errors."""

import email.utils
import json
import re
import time
from collections.abc import Iterator, Mapping
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
    '"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":%s}]%s}'
)
_USAGE = ',"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}'


def completion_body(
    seq: int,
    model: str,
    text: str,
    prompt_tokens: int,
    *,
    finish_reason: str | None = "stop",
    usage: bool = True,
    logprobs: dict[str, Any] | None = None,
) -> bytes:
    if logprobs is not None:  # off the hot path: only requests that ask for them
        plain = completion_body(
            seq, model, text, prompt_tokens, finish_reason=finish_reason, usage=usage
        )
        body = json.loads(plain)
        body["choices"][0]["logprobs"] = logprobs
        return _dumps(body)
    completion_tokens = tokens(text)
    usage_part = (
        _USAGE % (prompt_tokens, completion_tokens, prompt_tokens + completion_tokens)
        if usage
        else ""
    )
    return (
        _COMPLETION
        % (
            seq,
            int(time.time()),
            json.dumps(model, ensure_ascii=False),
            json.dumps(text, ensure_ascii=False),
            json.dumps(finish_reason),
            usage_part,
        )
    ).encode()


def truncate(text: str, max_tokens: object) -> tuple[str, str]:
    """``text`` cut to ``max_tokens`` whitespace tokens, and the finish_reason that says so."""
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return text, "stop"
    pieces = _PIECES.findall(text)
    words = [p for p in pieces if p.strip()]
    if len(words) <= max_tokens:
        return text, "stop"
    kept: list[str] = []
    count = 0
    for piece in pieces:
        if piece.strip():
            if count == max_tokens:
                break
            count += 1
        kept.append(piece)
    return "".join(kept).rstrip(), "length"


def stream_events(
    seq: int,
    model: str,
    text: str,
    prompt_tokens: int,
    *,
    include_usage: bool,
    finish_reason: str | None = "stop",
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
    yield event([{"index": 0, "delta": {}, "finish_reason": finish_reason}])
    if include_usage:
        completion_tokens = tokens(text)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        yield event([], usage=usage)
    yield b"data: [DONE]\n\n"


DONE_EVENT = b"data: [DONE]\n\n"


def _verbatim(data: dict[str, Any]) -> bytes:
    # ASCII-escaped: a scripted lone surrogate goes out as its JSON escape, as a
    # provider's would; NaN and Infinity as the bare tokens Python's JSON reads back.
    return json.dumps(data, separators=(",", ":")).encode()


def scripted_body(
    seq: int, model: str, fields: Mapping[str, Any], text: str, usage: dict[str, int] | None
) -> bytes:
    """A completion whose ``fields`` (content, finish_reason, logprobs, usage) are given
    verbatim; a field not given is the plain answer's (``text``, "stop", ``usage``)."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": fields.get("content", text)},
        "finish_reason": fields.get("finish_reason", "stop"),
    }
    if "logprobs" in fields:
        choice["logprobs"] = fields["logprobs"]
    if "tool_calls" in fields:
        choice["message"]["tool_calls"] = fields["tool_calls"]
    body: dict[str, Any] = {
        "id": f"chatcmpl-fake-{seq}",
        "object": "chat.completion",
        "model": model,
        "choices": [choice],
    }
    if "usage" in fields or usage is not None:
        body["usage"] = fields.get("usage", usage)
    return _verbatim(body)


def scripted_events(
    seq: int, model: str, fields: Mapping[str, Any], text: str, usage: dict[str, int] | None
) -> Iterator[bytes]:
    """The same answer streamed: role, the content in one delta (with the logprobs),
    the finish_reason, the usage, [DONE]."""
    head = {"id": f"chatcmpl-fake-{seq}", "object": "chat.completion.chunk", "model": model}

    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + _verbatim({**head, "choices": choices, **extra}) + b"\n\n"

    yield event([{"index": 0, "delta": {"role": "assistant", "content": ""}}])
    piece: dict[str, Any] = {"index": 0, "delta": {"content": fields.get("content", text)}}
    if "logprobs" in fields:
        piece["logprobs"] = fields["logprobs"]
    yield event([piece])
    if "tool_calls" in fields:
        for fragment in _call_fragments(fields["tool_calls"]):
            yield event([{"index": 0, "delta": {"tool_calls": [fragment]}}])
    yield event([{"index": 0, "delta": {}, "finish_reason": fields.get("finish_reason", "stop")}])
    if "usage" in fields or usage is not None:
        yield event([], usage=fields.get("usage", usage))
    yield DONE_EVENT


def _call_fragments(calls: Any) -> Iterator[Any]:
    """Scripted tool calls as a stream carries them: per call, its id, type and name with
    the first half of its arguments, then the second half (by index). Anything that is
    not a list of such calls goes out as it is, in one fragment."""
    if not isinstance(calls, list):
        yield calls
        return
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if not isinstance(call, dict) or not isinstance(function, dict):
            yield call
            continue
        if not isinstance(arguments, str):
            yield {**call, "index": index}
            continue
        half = len(arguments) // 2
        first = {**function, "arguments": arguments[:half]}
        yield {**call, "index": index, "function": first}
        yield {"index": index, "function": {"arguments": arguments[half:]}}


def flood_body(seq: int, model: str, content_bytes: int, piece_bytes: int) -> Iterator[bytes]:
    """A valid completion whose content is ``content_bytes`` of "x", in pieces."""
    yield (
        f'{{"id":"chatcmpl-fake-{seq}","object":"chat.completion","created":{int(time.time())},'
        f'"model":{json.dumps(model)},"choices":[{{"index":0,"message":{{"role":"assistant",'
        '"content":"'
    ).encode()
    piece = b"x" * piece_bytes
    left = content_bytes
    while left > 0:
        yield piece[: min(left, piece_bytes)]
        left -= piece_bytes
    yield b'"},"finish_reason":"stop"}]}'


def flood_events(seq: int, model: str, delta_bytes: int) -> Iterator[bytes]:
    """An endless stream of ``delta_bytes`` content deltas (the caller decides when to end)."""
    head = {"id": f"chatcmpl-fake-{seq}", "object": "chat.completion.chunk", "model": model}
    delta = {"index": 0, "delta": {"content": "x" * delta_bytes}, "finish_reason": None}
    event = b"data: " + _dumps({**head, "choices": [delta]}) + b"\n\n"
    while True:
        yield event


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
