"""What a provider says about its rate limits in response headers.

OpenAI's names: ``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests``,
``x-ratelimit-reset-requests`` (and ``-tokens``), resets as Go-style durations
(``6m0s``, ``1.5s``, ``20ms``). The IETF draft's names (``ratelimit-limit``,
``ratelimit-remaining``, ``ratelimit-reset``: seconds) speak of requests. Unparseable
values are ignored: a header a gateway mangles must never fail a call.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclass(frozen=True, slots=True)
class RateLimitInfo:
    """One response's view of the provider's budgets (``None``: not stated)."""

    limit_requests: float | None = None
    remaining_requests: float | None = None
    reset_requests_s: float | None = None
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens_s: float | None = None

    def requests_wait_s(self) -> float | None:
        """How long to hold new calls when no request is left: until one refills
        (a minute over the limit), at most until the stated reset."""
        return _wait(self.remaining_requests, self.limit_requests, self.reset_requests_s, 1.0)

    def tokens_wait_s(self, needed: float) -> float | None:
        """How long to hold a call needing ``needed`` tokens, by the same rule."""
        return _wait(self.remaining_tokens, self.limit_tokens, self.reset_tokens_s, needed)


def _wait(
    remaining: float | None, limit: float | None, reset_s: float | None, needed: float
) -> float | None:
    if remaining is None or remaining >= needed or reset_s is None:
        return None
    if limit is not None and limit > 0:
        return min(reset_s, (needed - remaining) * 60.0 / limit)
    return reset_s


def parse_rate_limit_headers(headers: Mapping[str, str]) -> RateLimitInfo | None:
    """The rate-limit headers of a response, or None when it has none."""
    found = {}
    for key, value in headers.items():
        lowered = key.lower()
        if "ratelimit" in lowered:  # every name below has it
            found[lowered] = value
    if not found:
        return None  # a local server or a fake: nothing to parse, once per answer
    get = found.get
    info = RateLimitInfo(
        limit_requests=_number(get("x-ratelimit-limit-requests") or get("ratelimit-limit")),
        remaining_requests=_number(
            get("x-ratelimit-remaining-requests") or get("ratelimit-remaining")
        ),
        reset_requests_s=parse_duration(
            get("x-ratelimit-reset-requests") or get("ratelimit-reset")
        ),
        limit_tokens=_number(get("x-ratelimit-limit-tokens")),
        remaining_tokens=_number(get("x-ratelimit-remaining-tokens")),
        reset_tokens_s=parse_duration(get("x-ratelimit-reset-tokens")),
    )
    return None if info == _EMPTY else info


def parse_duration(value: str | None) -> float | None:
    """``6m0s`` / ``1.5s`` / ``20ms`` / ``2`` (seconds) as seconds; None if unparseable."""
    if value is None:
        return None
    text = value.strip()
    plain = _number(text)
    if plain is not None:
        return plain
    total, end = 0.0, 0
    for match in _DURATION.finditer(text):
        if match.start() != end:
            return None
        total += float(match.group(1)) * _UNIT_S[match.group(2)]
        end = match.end()
    return total if end and end == len(text) else None


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if number >= 0 and number == number and number != float("inf") else None


_EMPTY = RateLimitInfo()
