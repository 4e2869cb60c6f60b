"""Liveness under combinations on the scale-out path: the random shapes of
``tests/engine/test_liveness.py`` (models, simulated and the fake provider, model,
server and run limits below and above each other, repeats, several runs, cancels
mid-run, transient faults with durable retries, RetryRun of permanent failures) on two
in-process replicas sharing one PostgreSQL database.

Each run is created, cancelled, watched and retried through replicas chosen at random,
so the work of one run is claimed by both and every decision crosses the change feed.
A monitor samples every lane of both replicas and fails the seed when one holds work it
could start with no call in flight for longer than the stall bound; each seed is
bounded in time. Afterwards every run has ended, its counters add up and match the
stored subtasks, and no replica holds any work.
"""

import random
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.config import ServerConfig, parse_config
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate
from tests._postgres import empty, pg_url
from tests._shared import wait_for
from tests.engine._support import TENANT, InlineScoring, upload
from tests.engine.test_liveness import _drive, _monitor_lanes, _RunPlan, _shape, _until_terminal
from tests.harness import config_data

__all__ = ["pg_url"]

pytestmark = pytest.mark.anyio
_SEED_BOUND_S = 90.0
_REPLICAS = ("a", "b")


def _config(
    tmp_path: Path, url: str, replica_id: str, models: list[Any], max_inflight: int
) -> ServerConfig:
    home = tmp_path / replica_id
    home.mkdir(exist_ok=True)
    limits = {"max_inflight": max_inflight, "max_runs_in_flight_per_tenant": 64}
    data = config_data(home, models=models, limits=limits, server={})
    data["store"] = {
        "url": url,
        "replica_id": replica_id,
        "lease_s": 2.0,
        "heartbeat_s": 0.3,
        "pool_size": 4,
    }
    return parse_config(data)


async def _idle(apps: list[Evald]) -> bool:
    return all(
        (state.buffered, state.in_flight) == (0, 0)
        for app in apps
        for state in app.engine.lane_states()
    )


async def _run_shape(tmp_path: Path, url: str, seed: int) -> None:
    shape = _shape(seed)
    rng = random.Random(seed + 1)
    fault = FaultRate(Behaviour.error(400, message="rejected by the fake"), 0.1)
    await empty(url)
    async with FakeProvider(FakeConfig(latency_ms=2.0, faults=(fault,), seed=seed)) as fake:
        models: list[Any] = list(shape.models)
        models += [
            fake.model_config(m, max_concurrency=c).model_dump() for m, c in shape.fake_models
        ]
        async with AsyncExitStack() as stack:
            apps = [
                await stack.enter_async_context(
                    Evald.open(
                        _config(tmp_path, url, rid, models, shape.max_inflight),
                        scoring=InlineScoring(),
                    )
                )
                for rid in _REPLICAS
            ]
            for name, records in shape.datasets.items():
                await upload(apps[0], name, records)
            stalls: list[str] = []
            run_ids: list[str] = []
            with anyio.fail_after(_SEED_BOUND_S):
                async with anyio.create_task_group() as monitor:
                    for app in apps:
                        monitor.start_soon(_monitor_lanes, app, stalls)
                    async with anyio.create_task_group() as tg:

                        async def drive(plan: _RunPlan) -> None:
                            run_ids.append(await _drive(apps, plan, rng))

                        for plan in shape.runs:
                            tg.start_soon(drive, plan)
                    monitor.cancel_scope.cancel()
            assert not stalls, f"seed {seed}: stalled lanes {stalls[:3]} in {shape}"
            for run_id in run_ids:
                run = await apps[0].runs.get(TENANT, run_id)
                assert run.state.is_terminal, (seed, run)
                c = run.progress.counters
                assert c.pending == c.running == c.failed == 0, (seed, run)
                assert c.total == c.succeeded + c.failed_permanent + c.cancelled, (seed, run)
                for task in run.progress.tasks:
                    assert task.counters == await apps[1].engine.store.recount_task(task.task_id)
            # A replica hears of another's cancel through the feed: give it a moment.
            await wait_for(lambda: _idle(apps), timeout_s=10)
            # Every claim came from a wake-up or a due retry, none from the re-check.
            assert [app.engine.dispatcher.missed_wakeups for app in apps] == [0, 0], seed


@pytest.mark.parametrize(("model_limit", "run_limit"), [(1, None), (4, 1)])
async def test_work_claimed_by_a_replica_without_a_share_goes_to_one_with_it(
    tmp_path: Path, pg_url: str, model_limit: int, run_limit: int | None
) -> None:
    """A model's or a run's limit of 1 on two replicas: one replica's share of it is
    none. The run is created on that replica, which claims its first page at once,
    before any balancing; that page goes back to the replica with the share instead of
    waiting there for a slot that never comes, and the limit holds across both."""
    await empty(pg_url)
    async with FakeProvider(FakeConfig(latency_ms=5.0)) as fake, AsyncExitStack() as stack:
        models = [fake.model_config("m", max_concurrency=model_limit).model_dump()]
        apps = [
            await stack.enter_async_context(
                Evald.open(_config(tmp_path, pg_url, rid, models, 8), scoring=InlineScoring())
            )
            for rid in _REPLICAS
        ]
        await upload(apps[1], "d", 30)
        spec = RunSpec(
            models=("m",), datasets=(DatasetRef("d", "1.0.0"),), max_concurrency=run_limit
        )
        # Replica "b" ranks second: its share of a limit of 1 is none.
        run = await apps[1].runs.create(TENANT, spec)
        with anyio.fail_after(60):
            await _until_terminal(apps[0], run.run_id)
        done = await apps[0].runs.get(TENANT, run.run_id)
        assert done.progress.counters.succeeded == 30, done
        assert fake.journal.peak_concurrency("m") == 1


async def test_a_replica_whose_share_grows_claims_at_once(tmp_path: Path, pg_url: str) -> None:
    """A replica joining a run under way: its first share of the model's limit is none
    (the first replica still holds all of it), and grows at a later balancing, once the
    first has let half go. The growth wakes its feeder: it claims then, not only when
    its periodic re-check comes round (which would count a missed wake-up)."""
    await empty(pg_url)
    async with FakeProvider(FakeConfig(latency_ms=20.0)) as fake, AsyncExitStack() as stack:
        models = [fake.model_config("m", max_concurrency=4).model_dump()]
        a = await stack.enter_async_context(
            Evald.open(_config(tmp_path, pg_url, "a", models, 8), scoring=InlineScoring())
        )
        await upload(a, "d", 400)
        spec = RunSpec(models=("m",), datasets=(DatasetRef("d", "1.0.0"),))
        run = await a.runs.create(TENANT, spec)
        b = await stack.enter_async_context(
            Evald.open(_config(tmp_path, pg_url, "b", models, 8), scoring=InlineScoring())
        )
        with anyio.fail_after(60):
            await _until_terminal(b, run.run_id)
        done = await b.runs.get(TENANT, run.run_id)
        assert done.progress.counters.succeeded == 400, done
        assert b.engine.dispatcher.missed_wakeups == 0
    assert fake.journal.peak_concurrency("m") <= 4


@pytest.mark.parametrize("seed", range(6))
async def test_random_shapes_on_two_replicas_all_finish(
    tmp_path: Path, pg_url: str, seed: int
) -> None:
    await _run_shape(tmp_path, pg_url, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 114))
async def test_random_shapes_on_two_replicas_all_finish_many_seeds(
    tmp_path: Path, pg_url: str, seed: int
) -> None:
    await _run_shape(tmp_path, pg_url, seed)
