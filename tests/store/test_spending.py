"""What a subtask spends is durable: its failed attempts per retry class (what the
retry budgets check) and its cost, summed into the run in the outcome's transaction;
both read back the same after the store is closed and opened again."""

import time

import pytest

from evald_server.domain import (
    Cost,
    ErrorReason,
    EvalError,
    OutcomeKind,
    RetryClass,
    RetryCounts,
)
from evald_server.store import Store
from tests.store._helpers import Reopen, add_dataset, add_run
from tests.store.test_runs import outcome

pytestmark = pytest.mark.anyio

_429 = EvalError.of(ErrorReason.PROVIDER_RATE_LIMITED, "429")
_TIMEOUT = EvalError.of(ErrorReason.PROVIDER_TIMEOUT, "timed out")


async def _fail(store: Store, run_id: str, retry_class: RetryClass, error: EvalError) -> None:
    (item,) = (await store.claim_ready(run_id, "m1", 1, time.time() + 10)).subtasks
    retry = outcome(
        item, OutcomeKind.RETRY, error=error, next_attempt_at=time.time(), retry_class=retry_class
    )
    await store.record_outcomes([retry], time.time())


async def test_failed_attempts_per_class_survive_a_reopen_and_reset_on_retry(
    store: Store, reopen: Reopen
) -> None:
    ds = await add_dataset(store, records=1)
    run = await add_run(store, [ds])
    await _fail(store, run.run_id, RetryClass.RATE_LIMITED, _429)
    await _fail(store, run.run_id, RetryClass.RATE_LIMITED, _429)
    await _fail(store, run.run_id, RetryClass.TIMEOUT, _TIMEOUT)

    store = await reopen(store)  # a restart: the counts come back with the claim
    (item,) = (await store.claim_ready(run.run_id, "m1", 1, time.time() + 10)).subtasks
    assert item.failures == RetryCounts(rate_limited=2, timeout=1)
    assert item.attempt == 3
    final = outcome(item, OutcomeKind.FAILED_PERMANENT, error=_TIMEOUT)
    await store.record_outcomes([final], time.time())
    (row,) = await store.run_subtasks(run.run_id, None, (), 0, 10)
    assert row.failures == RetryCounts(rate_limited=2, timeout=1)
    # RetryRun hands out a fresh budget: the counts start again.
    await store.retry_failed(run.run_id, [], [], time.time())
    (item,) = (await store.claim_ready(run.run_id, "m1", 1, time.time())).subtasks
    assert (item.failures, item.attempt) == (RetryCounts(), 0)


async def test_a_runs_cost_is_the_sum_of_its_successes_and_survives_a_reopen(
    store: Store, reopen: Reopen
) -> None:
    ds = await add_dataset(store, records=3)
    run = await add_run(store, [ds])
    a, b, c = (await store.claim_ready(run.run_id, "m1", 3, time.time())).subtasks
    costs = [Cost(picousd=7_000_001, tokens=11), Cost(picousd=3, tokens=5, estimated=True)]
    await store.record_outcomes(
        [
            outcome(a, OutcomeKind.SUCCEEDED, output="x", cost=costs[0]),
            outcome(b, OutcomeKind.SUCCEEDED, output="y", cost=costs[1]),
            # A failure costs nothing, even if it carried a cost by mistake.
            outcome(c, OutcomeKind.FAILED_PERMANENT, error=_429, cost=Cost(picousd=99, tokens=9)),
        ],
        time.time(),
    )
    store = await reopen(store)
    stored = await store.get_run(run.run_id)
    assert stored is not None
    assert stored.cost == Cost(picousd=7_000_004, tokens=16, estimated=True)
    rows = await store.run_subtasks(run.run_id, None, (), 0, 10)
    assert [r.cost for r in rows] == [*costs, None]
    inputs = await store.profile_inputs(a.task_id)
    assert inputs.cost == Cost(picousd=7_000_004, tokens=16, estimated=True)
