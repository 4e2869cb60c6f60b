"""What a subtask spends: failed attempts per retry class, and tokens and money.

* ``RetryClass``: a retryable failure is rate-limited (429), a timeout, or another
  transient failure; each may have its own retry budget (``RetryPolicy``).
* ``RetryCounts``: a subtask's failed attempts per class since it was last queued.
* ``Cost``: what successful calls cost, summed over a sample, a task or a run.
"""

from dataclasses import dataclass
from enum import StrEnum


class RetryClass(StrEnum):
    """The kinds of retryable failure that have a retry budget each."""

    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    TRANSIENT = "transient"


@dataclass(frozen=True, slots=True)
class RetryCounts:
    """Failed attempts of one subtask per retry class."""

    rate_limited: int = 0
    timeout: int = 0
    transient: int = 0

    def of(self, retry_class: RetryClass) -> int:
        return int(getattr(self, retry_class.value))

    def plus(self, retry_class: RetryClass) -> "RetryCounts":
        counts = {c.value: self.of(c) for c in RetryClass}
        counts[retry_class.value] += 1
        return RetryCounts(**counts)

    @property
    def total(self) -> int:
        return self.rate_limited + self.timeout + self.transient


PICO = 10**12  # money is counted in integer pico-USD: sums are exact, in any order


@dataclass(frozen=True, slots=True)
class Cost:
    """What successful calls cost. ``priced`` false: no price was configured for (one
    of) the models, and the money leaves those calls out. ``estimated``: some calls
    reported no token usage, so their tokens were estimated from the text."""

    picousd: int = 0
    tokens: int = 0
    estimated: bool = False
    priced: bool = True

    @property
    def cost_usd(self) -> float:
        return self.picousd / PICO

    def __add__(self, other: "Cost") -> "Cost":
        return Cost(
            picousd=self.picousd + other.picousd,
            tokens=self.tokens + other.tokens,
            estimated=self.estimated or other.estimated,
            priced=self.priced and other.priced,
        )
