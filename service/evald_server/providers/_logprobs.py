"""Token log-probabilities on the OpenAI chat wire: what to ask for, how to read it.

Asked for only when a run scores multiple choice by log-probabilities: ``logprobs:
true`` and ``top_logprobs: n`` (OpenAI allows up to 20; llama-cpp-python and vLLM
accept it too). Read from ``choices[0].logprobs.content[0]``: the first generated
token's ``top_logprobs`` list of ``{token, logprob}`` (the token itself when the list
is missing). Log-probabilities are auxiliary: an absent or malformed block reads as
"none came back" (``None``), never as a failed call, and the scorer falls back to the
text and counts it.
"""

import math
from collections.abc import Mapping
from typing import Any

TopLogprobs = tuple[tuple[str, float], ...]


def logprob_fields(top_logprobs: int | None) -> dict[str, Any]:
    """The request-body fields that ask for ``top_logprobs`` alternatives (none: {})."""
    if top_logprobs is None:
        return {}
    return {"logprobs": True, "top_logprobs": top_logprobs}


def first_token_alternatives(choice: Mapping[str, Any]) -> TopLogprobs | None:
    """(token, log-probability) of the first generated token's top alternatives in a
    choice (or a stream chunk's choice); None when it carries none."""
    block = choice.get("logprobs")
    content = block.get("content") if isinstance(block, Mapping) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], Mapping):
        return None
    first = content[0]
    listed = first.get("top_logprobs")
    entries = listed if isinstance(listed, list) and listed else [first]
    found = tuple(
        (entry["token"], float(entry["logprob"]))
        for entry in entries
        if isinstance(entry, Mapping)
        and isinstance(entry.get("token"), str)
        and isinstance(entry.get("logprob"), int | float)
        and not isinstance(entry.get("logprob"), bool)
        and math.isfinite(entry["logprob"])
    )
    return found or None
