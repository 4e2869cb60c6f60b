"""What to do after a failed call: retry later (when) or give up. Pure data and arithmetic.

The provider classifies a failure into a ``RetryDecision`` (transient, rate-limited with
an optional Retry-After, or permanent); the run's ``RetryPolicy`` turns that decision and
the subtask's failed attempts into its next state and its durable ``next_attempt_at``.

Retry budgets per class (``retry_class``: rate-limited, timeout, other transient): a
class with its own budget (``max_rate_limited_retries`` …) is counted only against it;
the classes without one share ``max_retries``, counted over their failures together. A
policy that sets only ``max_retries`` is therefore what it always was: one budget over
every retryable failure. The counts are stored per subtask (``RetryCounts``), so a
restart does not hand out a fresh budget.
"""

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evald_server.domain import (
    ErrorReason,
    FieldViolation,
    InvalidArgument,
    RetryClass,
    RetryCounts,
)
from evald_server.providers import ProviderFailure, RetryDecision, RetryKind

_MAX_RETRIES = 100
CLASS_BUDGETS = {
    RetryClass.RATE_LIMITED: "max_rate_limited_retries",
    RetryClass.TIMEOUT: "max_timeout_retries",
    RetryClass.TRANSIENT: "max_transient_retries",
}


def retry_class(failure: ProviderFailure) -> RetryClass | None:
    """The budget a failed call spends; None for a permanent failure."""
    if failure.decision.kind is RetryKind.PERMANENT:
        return None
    if failure.decision.kind is RetryKind.RATE_LIMITED:
        return RetryClass.RATE_LIMITED
    if failure.error.reason is ErrorReason.PROVIDER_TIMEOUT:
        return RetryClass.TIMEOUT
    return RetryClass.TRANSIENT


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of one run. Defaults: 3 retries after 5 s, 30 s and 120 s, ±50 % jitter.

    ``backoff_s[i]`` is the base delay before retry ``i + 1`` (the last one repeats);
    the delay is multiplied by a uniform draw in ``[1 - jitter, 1 + jitter]``. A failure
    that carries a Retry-After (any retryable status: 429, 503, 408, ...) waits at least
    that long, capped at ``retry_after_cap_s``. The per-class budgets are ``None``
    unless set: that class shares ``max_retries`` (module docstring).
    """

    max_retries: int = 3
    backoff_s: tuple[float, ...] = (5.0, 30.0, 120.0)
    jitter: float = 0.5
    retry_after_cap_s: float = 600.0
    max_rate_limited_retries: int | None = None
    max_timeout_retries: int | None = None
    max_transient_retries: int | None = None

    def __post_init__(self) -> None:
        problems = []
        for name in ("max_retries", *CLASS_BUDGETS.values()):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= _MAX_RETRIES:
                problems.append((f"retry_policy.{name}", f"must be between 0 and {_MAX_RETRIES}"))
        if not self.backoff_s:
            problems.append(("retry_policy.backoff_s", "needs at least one delay"))
        if any(not (math.isfinite(d) and 0 <= d <= 86_400) for d in self.backoff_s):
            problems.append(("retry_policy.backoff_s", "delays must be between 0 and 86400 s"))
        if not (math.isfinite(self.jitter) and 0 <= self.jitter <= 1):
            problems.append(("retry_policy.jitter", "must be between 0 and 1"))
        if not (math.isfinite(self.retry_after_cap_s) and 0 <= self.retry_after_cap_s <= 86_400):
            problems.append(("retry_policy.retry_after_cap_s", "must be between 0 and 86400 s"))
        if problems:
            raise InvalidArgument(
                ErrorReason.RUN_SPEC_INVALID,
                "; ".join(f"{name}: {what}" for name, what in problems),
                field_violations=tuple(FieldViolation(n, w) for n, w in problems),
            )

    def delay_s(self, attempts: int, decision: RetryDecision, rng: random.Random) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt (1-based)."""
        base = self.backoff_s[min(attempts, len(self.backoff_s)) - 1]
        delay = base * (1.0 + rng.uniform(-self.jitter, self.jitter))
        if decision.retry_after_s is not None:
            delay = max(delay, min(decision.retry_after_s, self.retry_after_cap_s))
        return max(0.0, delay)

    def budget_of(self, retry_class: RetryClass) -> int | None:
        """The class's own budget; None: it shares ``max_retries``."""
        budget: int | None = getattr(self, CLASS_BUDGETS[retry_class])
        return budget

    def should_retry(self, failed: RetryClass | None, counts: RetryCounts) -> bool:
        """Whether a subtask whose attempt just failed with class ``failed`` (None:
        permanently) gets another; ``counts`` are its failed attempts, this one included."""
        if failed is None:
            return False
        own = self.budget_of(failed)
        if own is not None:
            return counts.of(failed) <= own
        shared = sum(counts.of(c) for c in RetryClass if self.budget_of(c) is None)
        return shared <= self.max_retries

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "max_retries": self.max_retries,
            "backoff_s": list(self.backoff_s),
            "jitter": self.jitter,
            "retry_after_cap_s": self.retry_after_cap_s,
        }
        for name in CLASS_BUDGETS.values():  # only when set: older specs read the same
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RetryPolicy":
        defaults = cls()
        budgets = {name: data.get(name) for name in CLASS_BUDGETS.values()}
        return cls(
            max_retries=int(data.get("max_retries", defaults.max_retries)),
            backoff_s=tuple(float(d) for d in data.get("backoff_s", defaults.backoff_s)),
            jitter=float(data.get("jitter", defaults.jitter)),
            retry_after_cap_s=float(data.get("retry_after_cap_s", defaults.retry_after_cap_s)),
            **{name: None if v is None else int(v) for name, v in budgets.items()},
        )
