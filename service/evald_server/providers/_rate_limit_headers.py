"""What a provider says about its rate limits in response headers, within named bounds.

OpenAI's names: ``x-ratelimit-limit-requests``, ``x-ratelimit-remaining-requests``,
``x-ratelimit-reset-requests`` (and ``-tokens``), resets as Go-style durations
(``6m0s``, ``1.5s``, ``20ms``). The IETF draft's names (``ratelimit-limit``,
``ratelimit-remaining``, ``ratelimit-reset``: seconds) speak of requests. A limit is
per minute.

The headers steer every run on the model, so none is taken on trust (``HeaderBounds``):

* a value that is not a finite number >= 0 (or a well-formed duration) is ignored: a
  header a gateway mangles must never fail a call;
* a reset is capped at the model's ``rate_limit_reset_cap_s``: ``1e9`` or ``99999999h``
  holds the model's calls for that cap, not for decades;
* a stated limit below its floor (``REQUESTS_FLOOR``, ``TOKENS_FLOOR`` a minute), or
  under ``FAR_BELOW`` of the limit the config declares, is ignored: a budget of 0.001
  requests a minute would wedge the model for every run.

What was capped or ignored is listed in ``RateLimitInfo.adjusted`` (header, value, why),
for the adapter to log as a warning naming the header.
"""

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from evald_server.config import ModelConfig

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}

# A stated limit below these (a minute) is not a budget anyone runs a model on.
REQUESTS_FLOOR = 1.0
TOKENS_FLOOR = 1000.0
# A stated limit under this share of the declared one is a misreport, not a budget.
FAR_BELOW = 0.01
DEFAULT_RESET_CAP_S = 600.0  # ModelConfig.rate_limit_reset_cap_s's default


@dataclass(frozen=True, slots=True)
class HeaderBounds:
    """One model's bounds on its provider's rate-limit headers."""

    reset_cap_s: float = DEFAULT_RESET_CAP_S
    requests_per_minute: float | None = None  # declared in the config
    tokens_per_minute: float | None = None

    @classmethod
    def of(cls, model: ModelConfig) -> "HeaderBounds":
        return cls(model.rate_limit_reset_cap_s, model.requests_per_minute, model.tokens_per_minute)


DEFAULT_HEADER_BOUNDS = HeaderBounds()


@dataclass(frozen=True, slots=True)
class Adjustment:
    """A header value that was capped or ignored, and why (a fixed phrase per bound)."""

    header: str
    value: str
    why: str


@dataclass(frozen=True, slots=True)
class RateLimitInfo:
    """One response's view of the provider's budgets (``None``: not stated or ignored)."""

    limit_requests: float | None = None
    remaining_requests: float | None = None
    reset_requests_s: float | None = None
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens_s: float | None = None
    adjusted: tuple[Adjustment, ...] = ()

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


def parse_rate_limit_headers(
    headers: Mapping[str, str], bounds: HeaderBounds = DEFAULT_HEADER_BOUNDS
) -> RateLimitInfo | None:
    """The rate-limit headers of a response within ``bounds``, or None when it has none."""
    found = {}
    for key, value in headers.items():
        lowered = key.lower()
        if "ratelimit" in lowered:  # every name below has it
            found[lowered] = value
    if not found:
        return None  # a local server or a fake: nothing to parse, once per answer
    reader = _Reader(found, bounds)
    info = RateLimitInfo(
        limit_requests=reader.limit(
            ("x-ratelimit-limit-requests", "ratelimit-limit"),
            REQUESTS_FLOOR,
            bounds.requests_per_minute,
        ),
        remaining_requests=reader.number(("x-ratelimit-remaining-requests", "ratelimit-remaining")),
        reset_requests_s=reader.reset(("x-ratelimit-reset-requests", "ratelimit-reset")),
        limit_tokens=reader.limit(
            ("x-ratelimit-limit-tokens",), TOKENS_FLOOR, bounds.tokens_per_minute
        ),
        remaining_tokens=reader.number(("x-ratelimit-remaining-tokens",)),
        reset_tokens_s=reader.reset(("x-ratelimit-reset-tokens",)),
        adjusted=tuple(reader.adjusted),
    )
    return None if info == _EMPTY else info


class _Reader:
    """Reads one response's headers (the first name present of each field's names)."""

    def __init__(self, found: Mapping[str, str], bounds: HeaderBounds) -> None:
        self._found = found
        self._bounds = bounds
        self.adjusted: list[Adjustment] = []

    def _first(self, names: tuple[str, ...]) -> tuple[str, str] | None:
        for name in names:
            value = self._found.get(name)
            if value:
                return name, value
        return None

    def number(self, names: tuple[str, ...]) -> float | None:
        present = self._first(names)
        return None if present is None else _number(present[1])

    def reset(self, names: tuple[str, ...]) -> float | None:
        present = self._first(names)
        if present is None:
            return None
        seconds = parse_duration(present[1])
        cap = self._bounds.reset_cap_s
        if seconds is not None and seconds > cap:
            self.adjusted.append(Adjustment(*present, f"capped at {cap:g} s"))
            return cap
        return seconds

    def limit(self, names: tuple[str, ...], floor: float, declared: float | None) -> float | None:
        present = self._first(names)
        if present is None:
            return None
        stated = _number(present[1])
        if stated is None:
            return None
        if stated < floor:
            self.adjusted.append(
                Adjustment(*present, f"ignored: below the floor of {floor:g} a minute")
            )
            return None
        if declared is not None and stated < declared * FAR_BELOW:
            self.adjusted.append(
                Adjustment(*present, f"ignored: under {FAR_BELOW:.0%} of the declared {declared:g}")
            )
            return None
        return stated


def parse_duration(value: str | None) -> float | None:
    """``6m0s`` / ``1.5s`` / ``20ms`` / ``2`` (seconds) as seconds; None if unparseable,
    negative or not finite."""
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
    return total if end and end == len(text) and math.isfinite(total) else None


def _number(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if number >= 0 and math.isfinite(number) else None


_EMPTY = RateLimitInfo()
