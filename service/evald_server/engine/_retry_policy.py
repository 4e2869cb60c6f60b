"""What to do after a failed call: retry later (when) or give up. Pure data and arithmetic.

The provider classifies a failure into a ``RetryDecision`` (transient, rate-limited with
an optional Retry-After, or permanent); the run's ``RetryPolicy`` turns that decision and
the attempt count into the subtask's next state and its durable ``next_attempt_at``.
"""

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evald_server.domain import ErrorReason, FieldViolation, InvalidArgument
from evald_server.providers import RetryDecision, RetryKind


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of one run. Defaults: 3 retries after 5 s, 30 s and 120 s, ±50 % jitter.

    ``backoff_s[i]`` is the base delay before retry ``i + 1`` (the last one repeats);
    the delay is multiplied by a uniform draw in ``[1 - jitter, 1 + jitter]``. A failure
    that carries a Retry-After (any retryable status: 429, 503, 408, ...) waits at least
    that long, capped at ``retry_after_cap_s``.
    """

    max_retries: int = 3
    backoff_s: tuple[float, ...] = (5.0, 30.0, 120.0)
    jitter: float = 0.5
    retry_after_cap_s: float = 600.0

    def __post_init__(self) -> None:
        problems = []
        if not 0 <= self.max_retries <= 100:
            problems.append(("retry_policy.max_retries", "must be between 0 and 100"))
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

    def should_retry(self, attempts: int, decision: RetryDecision) -> bool:
        """Whether a subtask that failed its ``attempts``-th attempt gets another."""
        return decision.kind is not RetryKind.PERMANENT and attempts <= self.max_retries

    def to_json(self) -> dict[str, Any]:
        return {
            "max_retries": self.max_retries,
            "backoff_s": list(self.backoff_s),
            "jitter": self.jitter,
            "retry_after_cap_s": self.retry_after_cap_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RetryPolicy":
        defaults = cls()
        return cls(
            max_retries=int(data.get("max_retries", defaults.max_retries)),
            backoff_s=tuple(float(d) for d in data.get("backoff_s", defaults.backoff_s)),
            jitter=float(data.get("jitter", defaults.jitter)),
            retry_after_cap_s=float(data.get("retry_after_cap_s", defaults.retry_after_cap_s)),
        )
