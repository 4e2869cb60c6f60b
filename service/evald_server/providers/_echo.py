"""Loglikelihood over ``/v1/completions``: the request, the echoed tokens, and the sum.

One call scores one continuation: the body sends ``prompt = context + continuation``
with ``echo: true``, ``logprobs: 1``, ``temperature: 0`` and ``max_tokens`` 1 (what
lm-evaluation-harness sends; the generated token is ignored) or 0. The answer's
``choices[0].logprobs`` carries, per token of the echoed prompt (and of what was
generated), its text (``tokens``), its log-probability given what precedes it
(``token_logprobs``; the first token has none) and where it starts in the answer's text
(``text_offset``).

Every number is checked here, once, against named bounds; what is not as stated is a
``EchoInconsistent`` naming what, and the sample fails (never a silent wrong score):

==================  =========================================================
echo field          accepted
==================  =========================================================
arrays              lists of equal length, at most ``MAX_ECHO_TOKENS`` and the
                    model's ``context_tokens``
``tokens``          strings
``token_logprobs``  finite numbers <= 0 (``null`` only before the continuation)
``text_offset``     integers from 0 up to the answer text's length, each token
                    starting where the one before it ends
``text``            starts with the prompt sent, verbatim
==================  =========================================================

Then the tokens must reassemble the answer's text exactly (the prompt, then what was
generated), one of them must start where the prompt ends and one where the
continuation starts, and their numbers must match the ``usage`` the server reports
(prompt tokens, and prompt + generated tokens). llama-cpp-python 0.3.36 fails this:
its echo omits the final (generated) token although its text is in the answer, and
each listed log-probability is read from the distribution one position late (the
number beside " Paris" in "... is Paris" is log P(" Paris" | "... is Paris")), so its
sums belong to no continuation.

Where the context ends in spaces they move to the continuation, as lm-eval does
(``"Answer: " + "A"`` scores ``" A"`` after ``"Answer:"``).

vLLM also offers ``prompt_logprobs`` (a model's ``loglikelihood_source``): the body sends
``prompt_logprobs: 0`` instead of echo, and ``choices[0].prompt_logprobs`` lists, per
prompt token, ``null`` for the first and then ``{token id: {logprob, rank,
decoded_token}}`` holding that token alone. The decoded tokens must reassemble the
prompt after its first token (whose text is what they leave), their number must match
``usage.prompt_tokens``, and every number is held to the same bounds as an echo's; the
boundary and the sum are then found exactly as for an echo.
"""

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evald_server.providers._answer_bounds import AnswerBounds

# The most tokens an echo may list, whatever the model's context: a bound on the work
# and memory one answer can cost (its body is bounded by max_response_bytes too).
MAX_ECHO_TOKENS = 131_072


class EchoInconsistent(Exception):
    """The echoed tokens do not describe the text that was sent; ``kind`` names how."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ContinuationScore:
    """The continuation's log-probability (sum over its tokens) and its token count."""

    logprob: float
    tokens: int
    prompt_tokens: int | None
    completion_tokens: int | None


def split_context(context: str, continuation: str) -> tuple[str, str]:
    """lm-eval's split: trailing spaces of the context move to the continuation."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        return context[:-spaces], context[-spaces:] + continuation
    return context, continuation


ECHO = "echo"
PROMPT_LOGPROBS = "prompt_logprobs"


def echo_request_fields(
    prompt: str, max_tokens: int, seed: int | None, *, source: str = ECHO
) -> dict[str, Any]:
    """The body's fields after ``model`` for one loglikelihood call (``source``: the
    model's ``loglikelihood_source``)."""
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    if source == PROMPT_LOGPROBS:
        body["prompt_logprobs"] = 0  # the prompt's own tokens, no alternatives
    else:
        body |= {"logprobs": 1, "echo": True}
    if seed is not None:
        body["seed"] = seed
    return body


@dataclass(frozen=True, slots=True)
class _Echo:
    text: str
    tokens: tuple[str, ...]
    logprobs: tuple[float | None, ...]
    offsets: tuple[int, ...]


def continuation_score(
    data: Mapping[str, Any],
    context: str,
    continuation: str,
    bounds: AnswerBounds,
    *,
    source: str = ECHO,
) -> ContinuationScore:
    """The continuation's score from a parsed completions answer to ``context +
    continuation`` (``split_context`` already applied), or ``EchoInconsistent``."""
    prompt = context + continuation
    listed_generated = source != PROMPT_LOGPROBS  # prompt_logprobs lists the prompt only
    echo = (
        _checked_echo(data, bounds)
        if listed_generated
        else _prompt_logprobs_echo(data, prompt, bounds)
    )
    if not echo.text.startswith(prompt):
        raise EchoInconsistent(
            "echo_text",
            f"the echoed text does not start with the prompt sent ({len(prompt)} characters; "
            f"they differ from character {_first_difference(echo.text, prompt)})",
        )
    rebuilt = "".join(echo.tokens)
    if rebuilt != echo.text:
        raise EchoInconsistent(
            "echo_tokens",
            f"the {len(echo.tokens)} echoed tokens reassemble {len(rebuilt)} characters, not "
            f"the answer's {len(echo.text)} (the prompt sent and what was generated; they "
            f"differ from character {_first_difference(rebuilt, echo.text)})",
        )
    in_prompt = sum(1 for offset in echo.offsets if offset < len(prompt))
    if in_prompt < len(echo.offsets) and echo.offsets[in_prompt] != len(prompt):
        raise EchoInconsistent(
            "echo_tokens", "an echoed token runs from the prompt sent into the generated text"
        )
    usage = data.get("usage")
    stated = _usage_count(usage, "prompt_tokens")
    generated = _usage_count(usage, "completion_tokens")
    if stated is not None and stated != in_prompt:
        raise EchoInconsistent(
            "echo_token_count",
            f"the echo lists {in_prompt} prompt tokens where usage.prompt_tokens says {stated}",
        )
    if (
        listed_generated
        and stated is not None
        and generated is not None
        and len(echo.tokens) != stated + generated
    ):
        raise EchoInconsistent(
            "echo_token_count",
            f"the echo lists {len(echo.tokens)} tokens where usage says {stated} prompt + "
            f"{generated} generated",
        )
    try:
        first = echo.offsets.index(len(context))
    except ValueError:
        raise EchoInconsistent(
            "echo_boundary",
            f"no echoed token starts where the continuation does (character {len(context)}): "
            "the context's last token runs into it",
        ) from None
    numbers = echo.logprobs[first:in_prompt]
    if first == 0 or not numbers:
        raise EchoInconsistent("echo_boundary", "the context or the continuation has no token")
    total = 0.0
    for index, value in enumerate(numbers, start=first):
        if value is None:
            raise EchoInconsistent(
                "echo_logprobs", f"continuation token {index} has no log-probability"
            )
        total += value
    return ContinuationScore(total, len(numbers), stated, generated)


def loads_object(raw: bytes) -> dict[str, Any]:
    """The answer body as a JSON object (``ValueError`` otherwise)."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object, got {type(data).__name__}")
    return data


def _checked_echo(data: Mapping[str, Any], bounds: AnswerBounds) -> _Echo:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise EchoInconsistent("echo_missing", "the answer has no choices[0]")
    choice = choices[0]
    text, block = choice.get("text"), choice.get("logprobs")
    if not isinstance(text, str):
        raise EchoInconsistent("echo_missing", "choices[0].text is not a string")
    if not isinstance(block, Mapping):
        raise EchoInconsistent(
            "echo_missing", "choices[0].logprobs is missing: the server ignored logprobs/echo"
        )
    tokens, logprobs, offsets = (
        block.get("tokens"),
        block.get("token_logprobs"),
        block.get("text_offset"),
    )
    if not (isinstance(tokens, list) and isinstance(logprobs, list) and isinstance(offsets, list)):
        raise EchoInconsistent(
            "echo_missing", "logprobs.tokens, token_logprobs and text_offset must be lists"
        )
    cap = min(MAX_ECHO_TOKENS, bounds.call_tokens)
    if len(tokens) > cap:
        raise EchoInconsistent("echo_bounds", f"the echo lists {len(tokens)} tokens, over {cap}")
    if not len(tokens) == len(logprobs) == len(offsets):
        raise EchoInconsistent(
            "echo_bounds",
            f"tokens ({len(tokens)}), token_logprobs ({len(logprobs)}) and text_offset "
            f"({len(offsets)}) differ in length",
        )
    if not all(isinstance(token, str) for token in tokens):
        raise EchoInconsistent("echo_bounds", "a token is not a string")
    return _Echo(
        text, tuple(tokens), _checked_logprobs(logprobs), _checked_offsets(offsets, tokens, text)
    )


def _prompt_logprobs_echo(data: Mapping[str, Any], prompt: str, bounds: AnswerBounds) -> _Echo:
    """vLLM's ``prompt_logprobs`` as an echo of ``prompt``: its tokens (the first one's
    text is what the decoded others leave of the prompt), numbers and offsets."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise EchoInconsistent("echo_missing", "the answer has no choices[0]")
    entries = choices[0].get("prompt_logprobs")
    if not isinstance(entries, list) or not entries:
        raise EchoInconsistent(
            "echo_missing", "choices[0].prompt_logprobs is missing: the server ignored it"
        )
    cap = min(MAX_ECHO_TOKENS, bounds.call_tokens)
    if len(entries) > cap:
        raise EchoInconsistent(
            "echo_bounds", f"prompt_logprobs lists {len(entries)} tokens, over {cap}"
        )
    if entries[0] is not None:
        raise EchoInconsistent("echo_bounds", "prompt_logprobs[0] is not null")
    texts: list[str] = []
    numbers: list[object] = [None]
    for index, entry in enumerate(entries[1:], start=1):
        if not isinstance(entry, Mapping) or len(entry) != 1:
            raise EchoInconsistent(
                "echo_bounds", f"prompt_logprobs[{index}] is not one token's entry"
            )
        (only,) = entry.values()
        token = only.get("decoded_token") if isinstance(only, Mapping) else None
        if not isinstance(token, str):
            raise EchoInconsistent(
                "echo_bounds", f"prompt_logprobs[{index}] has no decoded_token string"
            )
        texts.append(token)
        numbers.append(only.get("logprob"))
    logprobs = _checked_logprobs(numbers)
    rest = "".join(texts)
    if not prompt.endswith(rest) or len(rest) >= len(prompt):
        raise EchoInconsistent(
            "echo_tokens",
            f"the {len(texts)} decoded prompt tokens after the first ({len(rest)} characters) "
            f"are not the end of the {len(prompt)}-character prompt sent",
        )
    tokens = (prompt[: len(prompt) - len(rest)], *texts)
    offsets, position = [], 0
    for token in tokens:
        offsets.append(position)
        position += len(token)
    return _Echo(prompt, tokens, logprobs, tuple(offsets))


def _checked_logprobs(values: Sequence[object]) -> tuple[float | None, ...]:
    checked: list[float | None] = []
    for index, value in enumerate(values):
        if value is None:
            checked.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EchoInconsistent("echo_bounds", f"token_logprobs[{index}] is not a number")
        if not math.isfinite(value) or value > 0:
            raise EchoInconsistent(
                "echo_bounds", f"token_logprobs[{index}] = {value!r} is not a finite number <= 0"
            )
        checked.append(float(value))
    return tuple(checked)


def _checked_offsets(values: Sequence[object], tokens: Sequence[str], text: str) -> tuple[int, ...]:
    checked: list[int] = []
    expected = 0
    for index, value in enumerate(values):
        if not _count(value) or not isinstance(value, int) or value > len(text):
            raise EchoInconsistent(
                "echo_bounds",
                f"text_offset[{index}] = {value!r} is not an offset into the "
                f"{len(text)}-character text",
            )
        if value != expected:
            raise EchoInconsistent(
                "echo_offsets",
                f"token {index} starts at character {value}, not at {expected} where the "
                "tokens before it end",
            )
        checked.append(value)
        expected = value + len(tokens[index])
    return tuple(checked)


def _usage_count(usage: object, name: str) -> int | None:
    value = usage.get(name) if isinstance(usage, Mapping) else None
    return value if _count(value) and isinstance(value, int) else None


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _first_difference(a: str, b: str) -> int:
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return min(len(a), len(b))
