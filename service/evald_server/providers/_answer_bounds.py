"""What evald accepts of the numbers and text in a provider's answer: one place, named bounds.

Whatever a provider sends back is hostile data. Every answer passes here once, from
whichever adapter produced it (the OpenAI wire parser, the simulator), and what leaves
is within its bound or unknown (``None``): a field that came back outside its bound is
never kept raw, and the answer carries a flag naming it (ListSamples shows the flags).

===============  ============================================  ==============================
field            accepted                                      otherwise
===============  ============================================  ==============================
usage tokens     integers, 0 <= n, prompt + completion <= the  both counts unknown (usage not
                 model's ``context_tokens`` (default           reported), ``usage_invalid``
                 ``DEFAULT_CALL_TOKENS``)
logprobs         ``{token: str, logprob: finite <= 0}``; the   none came back (the scorer
                 ``MAX_ALTERNATIVES`` likeliest kept           falls back), ``logprobs_invalid``
answer text      a string of Unicode scalar values             lone surrogates become U+FFFD,
                                                               ``text_repaired``
===============  ============================================  ==============================

A usage or logprobs block that is absent (or null) is not a fault: no flag, as before.
The rate-limit headers and Retry-After are bounded where they are parsed
(``_rate_limit_headers``, ``_retry_classification``).
"""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from evald_server.config import ModelConfig

# A provider that states more tokens than this for one call is not believed (a model
# configured without ``context_tokens``); ten times the largest context windows offered.
DEFAULT_CALL_TOKENS = 10_000_000
# The alternatives kept for the first token: the most the OpenAI API returns (vLLM may
# add the sampled token to them).
MAX_ALTERNATIVES = 20

USAGE_INVALID = "usage_invalid"
LOGPROBS_INVALID = "logprobs_invalid"
TEXT_REPAIRED = "text_repaired"

TopLogprobs = tuple[tuple[str, float], ...]
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True, slots=True)
class AnswerBounds:
    """One model's bounds on what its provider may report for one call."""

    call_tokens: int = DEFAULT_CALL_TOKENS

    @classmethod
    def of(cls, model: ModelConfig) -> "AnswerBounds":
        return cls(DEFAULT_CALL_TOKENS if model.context_tokens is None else model.context_tokens)


DEFAULT_BOUNDS = AnswerBounds()


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts within bounds (``None``: unknown) and the flags of what was not."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    flags: tuple[str, ...] = ()


_UNKNOWN_USAGE = Usage()
_INVALID_USAGE = Usage(flags=(USAGE_INVALID,))


def checked_usage(usage: object, bounds: AnswerBounds) -> Usage:
    """The counts of a ``usage`` object; an absent (null) block is unknown usage."""
    if usage is None:
        return _UNKNOWN_USAGE
    if not isinstance(usage, Mapping):
        return _INVALID_USAGE
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if not (_count_or_none(prompt) and _count_or_none(completion)):
        return _INVALID_USAGE
    if (prompt or 0) + (completion or 0) > bounds.call_tokens:
        return _INVALID_USAGE
    return Usage(prompt, completion)


def _count_or_none(value: object) -> bool:
    # bool is an int subclass; a count of True is nonsense.
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def checked_alternatives(block: object) -> tuple[TopLogprobs | None, tuple[str, ...]]:
    """The first generated token's (token, log-probability) alternatives from a choice's
    ``logprobs`` block (``content[0].top_logprobs``, or the token itself without them),
    the ``MAX_ALTERNATIVES`` likeliest; ``None`` when none came back, with
    ``logprobs_invalid`` when a block came back that is not log-probabilities."""
    if block is None:
        return None, ()
    content = block.get("content") if isinstance(block, Mapping) else None
    if content is None and isinstance(block, Mapping):
        return None, ()  # a block without tokens: nothing generated
    if not isinstance(content, list):
        return None, (LOGPROBS_INVALID,)
    if not content:
        return None, ()
    first = content[0]
    if not isinstance(first, Mapping):
        return None, (LOGPROBS_INVALID,)
    listed = first.get("top_logprobs")
    entries = listed if isinstance(listed, list) and listed else [first]
    found = []
    for entry in entries:
        pair = _alternative(entry)
        if pair is None:
            return None, (LOGPROBS_INVALID,)
        found.append(pair)
    if len(found) > MAX_ALTERNATIVES:  # the likeliest, in the provider's order
        kept = sorted(range(len(found)), key=lambda i: -found[i][1])[:MAX_ALTERNATIVES]
        found = [found[i] for i in sorted(kept)]
    return tuple(found), ()


def checked_plain_alternatives(block: object) -> tuple[TopLogprobs | None, tuple[str, ...]]:
    """The same from a ``/v1/completions`` answer's ``logprobs`` block, whose
    ``top_logprobs[0]`` maps each alternative token to its log-probability (the token
    itself, ``tokens[0]`` with ``token_logprobs[0]``, without it)."""
    if block is None:
        return None, ()
    if not isinstance(block, Mapping):
        return None, (LOGPROBS_INVALID,)
    tops, tokens, numbers = (
        block.get("top_logprobs"),
        block.get("tokens"),
        block.get("token_logprobs"),
    )
    if isinstance(tops, list) and tops and isinstance(tops[0], Mapping) and tops[0]:
        entries: list[object] = [{"token": t, "logprob": v} for t, v in tops[0].items()]
    elif isinstance(tokens, list) and tokens and isinstance(numbers, list) and numbers:
        entries = [{"token": tokens[0], "logprob": numbers[0]}]
    elif not tokens:
        return None, ()  # nothing generated
    else:
        return None, (LOGPROBS_INVALID,)
    return checked_alternatives({"content": [{"top_logprobs": entries}]})


def _alternative(entry: object) -> tuple[str, float] | None:
    if not isinstance(entry, Mapping):
        return None
    token, logprob = entry.get("token"), entry.get("logprob")
    if not isinstance(token, str) or isinstance(logprob, bool):
        return None
    if not isinstance(logprob, int | float) or not math.isfinite(logprob) or logprob > 0:
        return None
    return checked_text(token)[0], float(logprob)


def checked_text(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with lone UTF-16 surrogates (JSON may escape them; no store can keep
    them) replaced by U+FFFD, and ``text_repaired`` when there were any."""
    if not _SURROGATE.search(text):
        return text, ()
    return _SURROGATE.sub("\ufffd", text), (TEXT_REPAIRED,)
