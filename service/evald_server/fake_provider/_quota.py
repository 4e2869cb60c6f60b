"""The fake provider's rate limits: a per-model RPM/TPM quota and a hidden concurrency cap.

A quota is what a hosted provider states: requests and tokens per minute, each a token
bucket that holds one minute's worth (``burst_s`` seconds' worth when set) and refills
continuously. A request costs one request and ``prompt tokens + max_tokens`` tokens
(OpenAI counts ``max_tokens`` against the budget when the request arrives). Every
answer carries OpenAI's ``x-ratelimit-*`` headers; a request over either budget gets a
429 with ``Retry-After`` (whole seconds, rounded up) and ``retry-after-ms``.

``max_concurrent`` is the other kind of limit, one a provider does not announce: above
C calls in flight at once, the call is answered 429 (no headers but ``Retry-After``),
as an overloaded self-hosted server or a gateway does. Adaptive concurrency has to find C.
"""

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Quota:
    """One model's stated limits (``None``: that budget is unlimited)."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    burst_s: float = 60.0  # the buckets hold this many seconds of budget

    def __post_init__(self) -> None:
        for name in ("requests_per_minute", "tokens_per_minute"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"quota {name} must be > 0, got {value}")
        if self.burst_s <= 0:
            raise ValueError(f"quota burst_s must be > 0, got {self.burst_s}")

    def to_json(self) -> dict[str, Any]:
        return {
            "requests_per_minute": self.requests_per_minute,
            "tokens_per_minute": self.tokens_per_minute,
            "burst_s": self.burst_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Quota":
        unknown = set(data) - {"requests_per_minute", "tokens_per_minute", "burst_s"}
        if unknown:
            raise ValueError(f"quota: unknown fields {sorted(unknown)}")
        return cls(**dict(data))


class _Bucket:
    def __init__(self, per_minute: float, burst_s: float, now: float) -> None:
        self.limit = per_minute
        self.rate = per_minute / 60.0  # per second
        self.capacity = max(1.0, self.rate * burst_s)
        self.level = self.capacity
        self._at = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = now

    def wait_s(self, cost: float) -> float:
        """Seconds until ``cost`` fits (after ``refill``)."""
        need = min(cost, self.capacity) - self.level
        return 0.0 if need <= 0 else need / self.rate

    def reset_s(self) -> float:
        """Seconds until the bucket is full again: OpenAI's ``x-ratelimit-reset-*``."""
        return max(0.0, self.capacity - self.level) / self.rate


@dataclass(frozen=True, slots=True)
class QuotaVerdict:
    """What the quota says about one request: admitted or not, and the headers to send."""

    admitted: bool
    headers: dict[str, str]
    exceeded: str | None = None  # "requests" | "tokens" | "concurrency"


class QuotaState:
    """The live buckets of every model with a quota (single event loop: no locking)."""

    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._specs: dict[str, Quota] = {}

    def reset(self) -> None:
        self._buckets.clear()
        self._specs.clear()

    def admit(self, model: str, quota: Quota, cost_tokens: int, now: float) -> QuotaVerdict:
        if self._specs.get(model) != quota:  # a new or changed quota starts full
            self._specs[model] = quota
            self._buckets.pop((model, "requests"), None)
            self._buckets.pop((model, "tokens"), None)
        costs = {"requests": 1.0, "tokens": float(cost_tokens)}
        limits = {"requests": quota.requests_per_minute, "tokens": quota.tokens_per_minute}
        buckets: dict[str, _Bucket] = {}
        for kind, per_minute in limits.items():
            if per_minute is None:
                continue
            bucket = self._buckets.get((model, kind))
            if bucket is None:
                bucket = self._buckets[(model, kind)] = _Bucket(per_minute, quota.burst_s, now)
            bucket.refill(now)
            buckets[kind] = bucket
        waits = {kind: b.wait_s(costs[kind]) for kind, b in buckets.items()}
        exceeded = max(waits, key=lambda k: waits[k]) if waits else None
        if exceeded is not None and waits[exceeded] > 0:
            headers = _headers(buckets) | retry_after(waits[exceeded])
            return QuotaVerdict(False, headers, exceeded)
        for kind, bucket in buckets.items():
            bucket.level -= costs[kind]
        return QuotaVerdict(True, _headers(buckets))


def retry_after(wait_s: float) -> dict[str, str]:
    return {
        "Retry-After": str(max(1, math.ceil(wait_s))),
        "retry-after-ms": str(max(1, math.ceil(wait_s * 1000))),
    }


def _headers(buckets: Mapping[str, _Bucket]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for kind, bucket in buckets.items():
        headers[f"x-ratelimit-limit-{kind}"] = f"{bucket.limit:g}"
        headers[f"x-ratelimit-remaining-{kind}"] = str(max(0, math.floor(bucket.level)))
        headers[f"x-ratelimit-reset-{kind}"] = duration(bucket.reset_s())
    return headers


def duration(seconds: float) -> str:
    """OpenAI's reset format: ``6m0s``, ``1.5s``, ``20ms``."""
    if seconds < 1.0:
        return f"{max(0, math.ceil(seconds * 1000))}ms"
    minutes, rest = divmod(seconds, 60.0)
    rest_text = f"{rest:.3f}".rstrip("0").rstrip(".")
    return f"{int(minutes)}m{rest_text}s" if minutes else f"{rest_text}s"
