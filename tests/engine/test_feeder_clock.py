"""A lane's feeder never sleeps past a due retry, however the clock moves during a round;
and a wake-up that never comes costs a stall of the periodic re-check, not a wedge.

The wedge this guards against (a liveness seed hit it under load): a retry fell due
between the feeder's reading of the clock for its claims and its reading for the
wait, so the run was neither claimed (not yet due) nor waited for (no longer
waiting), and the feeder slept with nothing to wake it. A clock that moves on at
every reading makes that interleaving happen on every round.
"""

import math
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.config import ModelConfig
from evald_server.domain import RunState
from evald_server.engine import Limiter
from evald_server.engine._committer import Committer
from evald_server.engine._contexts import TaskContexts
from evald_server.engine._dispatcher import Dispatcher
from evald_server.engine._lanes import Lane
from evald_server.providers import build_provider
from evald_server.store import SqliteStore
from tests._shared import simulated_model, wait_for
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished

pytestmark = pytest.mark.anyio

_STEP_S = 0.01  # how far the clock moves at each reading


class _SteppingClock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        self.now += _STEP_S
        return self.now


def _async(check: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def probe() -> bool:
        return check()

    return probe


async def _nothing_committed(*_: object) -> None:
    raise AssertionError("no outcome is committed: the lane has no subtask")


async def test_a_retry_falling_due_between_two_clock_readings_is_claimed(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "feeder.sqlite3")
    try:
        clock = _SteppingClock()
        model = ModelConfig.model_validate(simulated_model("m", max_concurrency=1))
        committer = Committer(store, _nothing_committed)
        dispatcher = Dispatcher(
            store,
            Limiter(4, {"m": 1}),
            {"m": build_provider(model)},
            committer,
            TaskContexts(),
            lambda events: None,
            clock=clock,
            recheck_s=math.inf,  # no periodic re-check: only the round's own wait counts
        )
        lane = dispatcher.lanes["m"]
        # Due after the round's first reading of the clock and before its second.
        dispatcher.retry_scheduled("run-due", "m", clock.now + 1.5 * _STEP_S)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            # The claim finds no such run in the store and the lane forgets it: the
            # feeder looked for the retry once it was due.
            await wait_for(_async(lambda: "run-due" not in lane.runs), timeout_s=10)
            dispatcher.stop()
    finally:
        await store.close()


async def test_lost_wake_ups_cost_a_stall_each_not_a_wedge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every wake-up of every feeder lost: the run still ends, each page claimed by the
    periodic re-check, and each such claim is counted."""
    monkeypatch.setattr(Lane, "wake_feeder", lambda self: None)
    config = make_config(tmp_path, [simulated_model("m", max_concurrency=4)], max_inflight=4)
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 20)
        run = await app.runs.create(
            TENANT, RunSpec(models=("m",), datasets=(DatasetRef("d", "1.0.0"),))
        )
        with anyio.fail_after(60):
            await wait_until_finished(app, run.run_id)
        assert (await app.runs.get(TENANT, run.run_id)).state is RunState.SUCCEEDED
        assert app.engine.dispatcher.missed_wakeups >= 1
