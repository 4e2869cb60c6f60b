"""A run budget's spent total across replicas: the stored total as last read plus this
process's charges since, each counted once (committed after the read, or not yet)."""

from evald_server.domain import Cost, OutcomeKind
from evald_server.engine import RunBudget
from evald_server.engine._cost import RunBudgets
from evald_server.store import SubtaskOutcome


def _answer(row_id: int, tokens: int) -> SubtaskOutcome:
    return SubtaskOutcome(
        row_id, "run", "t", "m", row_id, 0, OutcomeKind.SUCCEEDED, cost=Cost(tokens=tokens)
    )


def test_the_stored_total_counts_the_other_replicas_and_this_ones_commits_once() -> None:
    budgets = RunBudgets()
    assert budgets.track("run", RunBudget(max_tokens=100), Cost(tokens=10)) is None
    first, second = _answer(1, 20), _answer(2, 20)
    assert budgets.charge(first) is None
    assert budgets.charge(second) is None
    assert budgets.spent("run") == Cost(tokens=50)  # 10 stored, 40 not committed
    budgets.committed([first])
    assert budgets.spent("run") == Cost(tokens=50), "committed after the read: still 50"
    # The read holds this replica's commit (20) and another replica's 25.
    assert budgets.refresh("run", Cost(tokens=55)) is None
    assert budgets.spent("run") == Cost(tokens=75), "55 stored + 20 not committed"
    budgets.committed([second])
    assert budgets.spent("run") == Cost(tokens=75)
    # Another replica's spending alone takes the run to its budget.
    reason = budgets.refresh("run", Cost(tokens=100))
    assert reason == "budget reached: used 100 tokens of max_tokens 100"
    assert budgets.refresh("run", Cost(tokens=120)) is None, "said once"


def test_a_run_without_a_budget_is_not_followed() -> None:
    budgets = RunBudgets()
    assert budgets.track("run", RunBudget(), Cost()) is None
    assert budgets.tracked() == []
    assert budgets.refresh("run", Cost(tokens=10**9)) is None
