"""Cost accounting, pure: prices in pico-USD per token, a call's cost (estimated where
the provider reported no usage), the bounds a run budget refuses by itself, when it is
reached, and the spent totals it is checked against."""

import math

import pytest

from evald_server.config import Price
from evald_server.domain import PICO, Cost, ErrorReason, InvalidArgument, OutcomeKind
from evald_server.engine import RunBudget
from evald_server.engine._cost import (
    MAX_BUDGET_TOKENS,
    MAX_BUDGET_USD,
    Pricing,
    RunBudgets,
    call_cost,
)
from evald_server.store import SubtaskOutcome


def test_a_price_per_million_tokens_is_pico_usd_per_token() -> None:
    assert PICO == 10**12
    assert Pricing.of(None) is None
    pricing = Pricing.of(Price(input_per_million=2.5, output_per_million=10.0))
    assert pricing == Pricing(input_picousd=2_500_000, output_picousd=10_000_000)
    tiny = Pricing.of(Price(input_per_million=0.0000014, output_per_million=0.0000016))
    assert tiny == Pricing(1, 2)  # kept to 10^-6 USD a million, rounded


def test_a_reported_call_costs_its_usage_at_its_price() -> None:
    pricing = Pricing(input_picousd=3, output_picousd=7)
    cost = call_cost(pricing, 100, 20, prompt_chars=9999, output="x" * 9999)
    assert cost == Cost(picousd=300 + 140, tokens=120, estimated=False, priced=True)
    unpriced = call_cost(None, 100, 20, prompt_chars=0, output="")
    assert unpriced == Cost(picousd=0, tokens=120, estimated=False, priced=False)


@pytest.mark.parametrize(
    ("prompt_tokens", "completion_tokens", "tokens"),
    [(None, 20, 3 + 20), (100, None, 100 + 2), (None, None, 3 + 2)],
)
def test_what_the_provider_did_not_report_is_estimated_from_the_text(
    prompt_tokens: int | None, completion_tokens: int | None, tokens: int
) -> None:
    # 9 characters: 3 tokens (rounded up); 5 characters: 2.
    cost = call_cost(
        Pricing(1, 1000), prompt_tokens, completion_tokens, prompt_chars=9, output="abcde"
    )
    assert cost.tokens == tokens
    assert cost.estimated
    completion = 2 if completion_tokens is None else completion_tokens
    assert cost.picousd == (tokens - completion) * 1 + completion * 1000


@pytest.mark.parametrize(
    "max_cost_usd", [0.0, -1.0, math.nan, math.inf, -math.inf, MAX_BUDGET_USD * 1.0001]
)
def test_a_budget_refuses_an_out_of_range_cost_by_itself(max_cost_usd: float) -> None:
    with pytest.raises(InvalidArgument) as refused:
        RunBudget(max_cost_usd=max_cost_usd)
    assert refused.value.reason is ErrorReason.RUN_SPEC_INVALID
    assert [v.field for v in refused.value.field_violations] == ["budget.max_cost_usd"]
    assert "must be > 0 and <= 1e+09" in str(refused.value)


@pytest.mark.parametrize("max_tokens", [0, -5, True, MAX_BUDGET_TOKENS + 1])
def test_a_budget_refuses_an_out_of_range_token_count_by_itself(max_tokens: int) -> None:
    with pytest.raises(InvalidArgument) as refused:
        RunBudget(max_tokens=max_tokens)
    assert [v.field for v in refused.value.field_violations] == ["budget.max_tokens"]
    assert f"must be between 1 and {MAX_BUDGET_TOKENS}" in str(refused.value)


def test_both_problems_are_named_at_once_and_the_bounds_themselves_are_accepted() -> None:
    with pytest.raises(InvalidArgument) as refused:
        RunBudget(max_cost_usd=-1.0, max_tokens=0)
    assert [v.field for v in refused.value.field_violations] == [
        "budget.max_cost_usd",
        "budget.max_tokens",
    ]
    assert "; " in str(refused.value)
    RunBudget(max_cost_usd=MAX_BUDGET_USD, max_tokens=MAX_BUDGET_TOKENS)
    RunBudget(max_cost_usd=1e-9, max_tokens=1)
    assert not RunBudget().limited
    assert RunBudget(max_tokens=1).limited
    assert RunBudget(max_cost_usd=1.0).limited


def test_a_budget_is_reached_at_its_limit_not_before() -> None:
    budget = RunBudget(max_cost_usd=2.0, max_tokens=1000)
    assert budget.reached(Cost(picousd=2 * PICO - 1, tokens=999)) is None
    assert budget.reached(Cost(picousd=2 * PICO, tokens=0)) == (
        "budget reached: spent 2.000000 USD of max_cost_usd 2"
    )
    assert budget.reached(Cost(picousd=0, tokens=1000)) == (
        "budget reached: used 1000 tokens of max_tokens 1000"
    )
    assert RunBudget().reached(Cost(picousd=10**30, tokens=10**30)) is None


def test_a_budget_round_trips_through_json() -> None:
    for budget in (RunBudget(), RunBudget(max_cost_usd=1.5), RunBudget(max_tokens=7)):
        assert RunBudget.from_json(budget.to_json()) == budget
    assert RunBudget().to_json() == {}
    assert RunBudget(max_cost_usd=1.5, max_tokens=7).to_json() == {
        "max_cost_usd": 1.5,
        "max_tokens": 7,
    }
    assert RunBudget.from_json({"max_cost_usd": "2", "max_tokens": "3"}) == RunBudget(2.0, 3)


def _answer(row_id: int, cost: Cost | None, run_id: str = "run") -> SubtaskOutcome:
    return SubtaskOutcome(row_id, run_id, "t", "m", row_id, 0, OutcomeKind.SUCCEEDED, cost=cost)


def test_spent_totals_count_charges_until_committed_and_say_the_limit_once() -> None:
    budgets = RunBudgets()
    assert budgets.spent("run") is None
    assert budgets.charge(_answer(1, Cost(tokens=5))) is None  # not followed
    assert budgets.track("run", RunBudget(max_tokens=30), Cost(tokens=5, picousd=1)) is None
    assert budgets.tracked() == ["run"]
    assert budgets.charge(_answer(2, None)) is None  # no cost: nothing to charge
    assert budgets.charge(_answer(3, Cost(tokens=10, picousd=4))) is None
    assert budgets.spent("run") == Cost(tokens=15, picousd=5)
    budgets.committed([_answer(3, None), _answer(9, None), _answer(1, None, "other")])
    assert budgets.spent("run") == Cost(tokens=15, picousd=5)  # moved, not added again
    reason = budgets.charge(_answer(4, Cost(tokens=15)))
    assert reason == "budget reached: used 30 tokens of max_tokens 30"
    assert budgets.charge(_answer(5, Cost(tokens=1))) is None  # said once
    assert budgets.spent("run") == Cost(tokens=31, picousd=5)
    budgets.forget("run")
    assert budgets.spent("run") is None
    assert budgets.tracked() == []
    assert budgets.refresh("run", Cost(tokens=1000)) is None


def test_a_run_already_spent_is_said_at_once() -> None:
    budgets = RunBudgets()
    reason = budgets.track("run", RunBudget(max_cost_usd=1.0), Cost(picousd=PICO))
    assert reason == "budget reached: spent 1.000000 USD of max_cost_usd 1"
    # Tracked again (a restart, a RetryRun): said again.
    again = budgets.track("run", RunBudget(max_cost_usd=1.0), Cost(picousd=PICO))
    assert again == reason
