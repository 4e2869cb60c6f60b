"""Token log-probabilities on the OpenAI chat wire: what to ask for, where to read them.

Asked for only when a run scores multiple choice by log-probabilities: ``logprobs:
true`` and ``top_logprobs: n`` (OpenAI allows up to 20; llama-cpp-python and vLLM
accept it too). Read from ``choices[0].logprobs.content[0]``: the first generated
token's ``top_logprobs`` list of ``{token, logprob}`` (the token itself when the list
is missing), checked by ``_answer_bounds.checked_alternatives``. Log-probabilities are
auxiliary: an absent or invalid block reads as "none came back" (``None``; an invalid
one flagged ``logprobs_invalid``), never as a failed call, and the scorer falls back to
the text and counts it.
"""

from collections.abc import Mapping
from typing import Any

from evald_server.providers._answer_bounds import TopLogprobs, checked_alternatives


def logprob_fields(top_logprobs: int | None) -> dict[str, Any]:
    """The request-body fields that ask for ``top_logprobs`` alternatives (none: {})."""
    if top_logprobs is None:
        return {}
    return {"logprobs": True, "top_logprobs": top_logprobs}


def first_token_alternatives(
    choice: Mapping[str, Any],
) -> tuple[TopLogprobs | None, tuple[str, ...]]:
    """(token, log-probability) of the first generated token's top alternatives in a
    choice (or a stream chunk's choice), None when it carries none; and the flags of a
    block that was not log-probabilities."""
    return checked_alternatives(choice.get("logprobs"))
