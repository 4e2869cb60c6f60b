"""Cost accounting and run budgets.

* ``Pricing``: a model's configured price as integer pico-USD per token, so that a
  run's cost is an exact integer sum (the same in any order, equal to Σ usage × price).
* ``call_cost``: what one successful call cost. Tokens the provider did not report are
  estimated from the text (4 characters a token) and the cost is marked estimated.
* ``RunBudget``: the run's ``max_cost_usd`` / ``max_tokens``.
* ``RunBudgets``: the spent totals of the live runs with a budget, charged as each
  outcome comes back. The dispatcher stops a run's dispatching the moment a charge
  reaches its budget; the calls then in flight finish and are charged too, so a run
  overshoots by at most the cost of the calls it had in flight. The durable totals are
  the store's (moved in each outcome's transaction); a restart starts from them.
"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from evald_server.config import Price
from evald_server.domain import PICO, Cost, ErrorReason, FieldViolation, InvalidArgument
from evald_server.engine._rate_control import CHARS_PER_TOKEN
from evald_server.store import SubtaskOutcome

MAX_BUDGET_USD = 1e9
MAX_BUDGET_TOKENS = 10**15


@dataclass(frozen=True, slots=True)
class Pricing:
    input_picousd: int  # per token
    output_picousd: int

    @classmethod
    def of(cls, price: Price | None) -> "Pricing | None":
        if price is None:
            return None
        # USD per million tokens = pico-USD per token × 10^-6: kept to 10^-6 USD/M.
        per_token = PICO // 10**6
        return cls(
            input_picousd=round(price.input_per_million * per_token),
            output_picousd=round(price.output_per_million * per_token),
        )


def _estimate(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def call_cost(
    pricing: Pricing | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    *,
    prompt_chars: int,
    output: str,
) -> Cost:
    """One successful call's cost; a count the provider did not report is estimated."""
    estimated = prompt_tokens is None or completion_tokens is None
    prompt = _estimate(prompt_chars) if prompt_tokens is None else prompt_tokens
    completion = _estimate(len(output)) if completion_tokens is None else completion_tokens
    if pricing is None:
        return Cost(tokens=prompt + completion, estimated=estimated, priced=False)
    money = prompt * pricing.input_picousd + completion * pricing.output_picousd
    return Cost(picousd=money, tokens=prompt + completion, estimated=estimated)


@dataclass(frozen=True, slots=True)
class RunBudget:
    """What a run may spend; None: no limit of that kind."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        problems = []
        cost = self.max_cost_usd
        if cost is not None and not (math.isfinite(cost) and 0 < cost <= MAX_BUDGET_USD):
            problems.append(("budget.max_cost_usd", f"must be > 0 and <= {MAX_BUDGET_USD:g}"))
        tokens = self.max_tokens
        if tokens is not None and (
            isinstance(tokens, bool) or not 1 <= tokens <= MAX_BUDGET_TOKENS
        ):
            problems.append(("budget.max_tokens", f"must be between 1 and {MAX_BUDGET_TOKENS}"))
        if problems:
            raise InvalidArgument(
                ErrorReason.RUN_SPEC_INVALID,
                "; ".join(f"{name}: {what}" for name, what in problems),
                field_violations=tuple(FieldViolation(n, w) for n, w in problems),
            )

    @property
    def limited(self) -> bool:
        return self.max_cost_usd is not None or self.max_tokens is not None

    def reached(self, spent: Cost) -> str | None:
        """Why the run must stop, once ``spent`` reaches a limit; None before."""
        if self.max_cost_usd is not None and spent.picousd >= round(self.max_cost_usd * PICO):
            return (
                f"budget reached: spent {spent.cost_usd:.6f} USD of max_cost_usd "
                f"{self.max_cost_usd:g}"
            )
        if self.max_tokens is not None and spent.tokens >= self.max_tokens:
            return f"budget reached: used {spent.tokens} tokens of max_tokens {self.max_tokens}"
        return None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.max_cost_usd is not None:
            data["max_cost_usd"] = self.max_cost_usd
        if self.max_tokens is not None:
            data["max_tokens"] = self.max_tokens
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunBudget":
        cost, tokens = data.get("max_cost_usd"), data.get("max_tokens")
        return cls(
            max_cost_usd=None if cost is None else float(cost),
            max_tokens=None if tokens is None else int(tokens),
        )


class RunBudgets:
    """Spent totals of the live runs that have a budget (single event loop).

    A run's spent total is its durable total as last read from the store (at load, and
    at each balancing when replicas share the store: every replica's committed outcomes
    move it) plus this process's charges since: those committed after that read and
    those not committed yet. A commit that lands while a read is under way is taken
    for part of it: at worst it is left out until the next read, never counted twice."""

    def __init__(self) -> None:
        self._budgets: dict[str, RunBudget] = {}
        self._stored: dict[str, Cost] = {}  # the durable total, as last read
        self._committed: dict[str, Cost] = {}  # this process's, committed since the read
        self._pending: dict[str, dict[int, Cost]] = {}  # charged, not committed yet (by row)
        self._pending_total: dict[str, Cost] = {}
        self._reached: dict[str, str] = {}

    def track(self, run_id: str, budget: RunBudget, spent: Cost) -> str | None:
        """Follow a run from its durable totals; the reason if it is already spent."""
        if not budget.limited:
            return None
        self._budgets[run_id] = budget
        self._stored[run_id] = spent
        self._committed[run_id] = Cost()
        self._pending[run_id] = {}
        self._pending_total[run_id] = Cost()
        self._reached.pop(run_id, None)
        return self._check(run_id)

    def charge(self, outcome: SubtaskOutcome) -> str | None:
        """Add a success's cost; the reason when this charge reached the budget (once)."""
        if outcome.cost is None or outcome.run_id not in self._budgets:
            return None
        self._pending[outcome.run_id][outcome.row_id] = outcome.cost
        self._pending_total[outcome.run_id] = self._pending_total[outcome.run_id] + outcome.cost
        return self._check(outcome.run_id)

    def committed(self, outcomes: Iterable[SubtaskOutcome]) -> None:
        """These outcomes are in the store's totals now (their transaction committed)."""
        for outcome in outcomes:
            pending = self._pending.get(outcome.run_id)
            cost = None if pending is None else pending.pop(outcome.row_id, None)
            if cost is not None:
                run_id = outcome.run_id
                self._committed[run_id] = self._committed[run_id] + cost
                left = self._pending_total[run_id]
                self._pending_total[run_id] = replace(
                    left, picousd=left.picousd - cost.picousd, tokens=left.tokens - cost.tokens
                )

    def tracked(self) -> list[str]:
        return list(self._budgets)

    def refresh(self, run_id: str, stored: Cost) -> str | None:
        """The run's durable total read again (it holds this process's commits so far);
        the reason when the run has now reached its budget (once)."""
        if run_id not in self._budgets:
            return None
        self._stored[run_id] = stored
        self._committed[run_id] = Cost()
        return self._check(run_id)

    def _check(self, run_id: str) -> str | None:
        if run_id in self._reached:
            return None
        spent = self.spent(run_id)
        reason = None if spent is None else self._budgets[run_id].reached(spent)
        if reason is not None:
            self._reached[run_id] = reason
        return reason

    def spent(self, run_id: str) -> Cost | None:
        if run_id not in self._budgets:
            return None
        return self._stored[run_id] + self._committed[run_id] + self._pending_total[run_id]

    def forget(self, run_id: str) -> None:
        for table in (
            self._budgets,
            self._stored,
            self._committed,
            self._pending,
            self._pending_total,
            self._reached,
        ):
            table.pop(run_id, None)
