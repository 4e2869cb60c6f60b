"""Log-probabilities from the fake, for requests with ``logprobs: true``.

An ``AlternativesFn`` says, for a request and the answer text, the first token's
alternatives as (token, log-probability), most likely first; by default the answer's
first piece alone at log(0.9). An empty list sends no ``logprobs`` block, like a
server that ignores the parameter. ``top_logprobs`` caps how many are sent.
"""

import math
import re
from collections.abc import Callable, Sequence
from typing import Any

_FIRST_PIECE = re.compile(r"\s*\S+")

AlternativesFn = Callable[[Any, str], Sequence[tuple[str, float]]]


def first_piece(_chat: Any, text: str) -> list[tuple[str, float]]:
    found = _FIRST_PIECE.match(text)
    return [] if found is None else [(found.group(0), math.log(0.9))]


def logprobs_block(alternatives: Sequence[tuple[str, float]], top_n: int) -> dict[str, Any] | None:
    """The ``choices[0].logprobs`` object, or None when there is nothing to send."""
    if not alternatives:
        return None
    token, logprob = alternatives[0]
    top = [{"token": t, "logprob": p, "bytes": None} for t, p in alternatives[: max(top_n, 1)]]
    return {
        "content": [{"token": token, "logprob": logprob, "bytes": None, "top_logprobs": top}],
        "refusal": None,
    }
