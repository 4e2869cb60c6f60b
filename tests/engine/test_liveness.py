"""Liveness under combinations of limits: every run ends, no lane idles with ready work.

Random shapes (1-5 models, simulated and the fake provider on loopback, model, server
and run limits below and above each other, repeats, several concurrent runs, cancels
mid-run, transient faults with durable retries, RetryRun of permanent failures, of
cancelled runs too), each seed bounded in time. A monitor samples every lane while the
shape runs and fails the seed when a lane has work it could start and no call in flight
for longer than a stall bound. ``make test`` runs a bounded number of seeds; the ``slow``
variant runs more.
"""

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RetryPolicy, RunSpec
from evald_server.domain import FailedPrecondition, RunState
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate
from tests._shared import simulated_model
from tests.engine._support import TENANT, InlineScoring, make_config, upload

_FAST = RetryPolicy(max_retries=2, backoff_s=(0.02, 0.05), jitter=0.5)
_STALL_S = 3.0  # a lane with buffered work and no call for this long is stalled
_SEED_BOUND_S = 60.0


@dataclass(frozen=True)
class _RunPlan:
    models: tuple[str, ...]
    datasets: tuple[str, ...]
    max_concurrency: int | None
    repeat: int
    cancel_after_s: float | None
    start_after_s: float


@dataclass(frozen=True)
class _Shape:
    models: list[dict[str, Any]]
    fake_models: list[tuple[str, int]]  # (model id, max_concurrency) served by the fake
    max_inflight: int
    datasets: dict[str, int]
    runs: list[_RunPlan]


def _shape(seed: int) -> _Shape:
    rng = random.Random(seed)
    count = rng.randint(1, 5)
    model_ids = [f"m{i}" for i in range(count)]
    fake_ids = [m for m in model_ids if rng.random() < 0.3]
    caps = {m: rng.randint(1, 5) for m in model_ids}
    models = [
        simulated_model(
            m,
            latency_ms=rng.choice((0.5, 2.0, 6.0)),
            max_concurrency=caps[m],
            fault_rate=rng.choice((0.0, 0.0, 0.15)),
            accuracy=0.8,
            seed=seed,
        )
        for m in model_ids
        if m not in fake_ids
    ]
    datasets = {f"d{i}": rng.randint(3, 20) for i in range(rng.randint(1, 3))}
    runs = []
    for _ in range(rng.randint(1, 4)):
        chosen = tuple(sorted(rng.sample(model_ids, rng.randint(1, count))))
        names = tuple(sorted(rng.sample(sorted(datasets), rng.randint(1, len(datasets)))))
        # Run limits below, equal to and above the model limits (and none at all).
        low, high = min(caps[m] for m in chosen), sum(caps[m] for m in chosen)
        limit = rng.choice((None, 1, 2, low, max(1, high - 1), high + 2))
        runs.append(
            _RunPlan(
                models=chosen,
                datasets=names,
                max_concurrency=limit,
                repeat=rng.choice((1, 1, 2)),
                cancel_after_s=rng.choice((None, None, None, rng.uniform(0.0, 0.15))),
                start_after_s=rng.uniform(0.0, 0.1),
            )
        )
    return _Shape(
        models=models,
        fake_models=[(m, caps[m]) for m in fake_ids],
        max_inflight=rng.choice((2, 4, 32, 32)),
        datasets=datasets,
        runs=runs,
    )


async def _monitor_lanes(app: Evald, stalls: list[str]) -> None:
    """Record a lane that holds work it could start (buffered, its run limit not full)
    with no call in flight for ``_STALL_S``."""
    idle_since: dict[str, float] = {}
    while True:
        now = time.monotonic()
        for state in app.engine.lane_states():
            if state.ready > 0 and state.in_flight == 0:
                since = idle_since.setdefault(state.model_id, now)
                if now - since > _STALL_S:
                    stalls.append(f"{state.model_id}: {state}")
            else:
                idle_since.pop(state.model_id, None)
        await anyio.sleep(0.05)


async def _drive(apps: Sequence[Evald], plan: _RunPlan, rng: random.Random) -> str:
    """One run: each request goes to one of ``apps`` (replicas) picked at random."""
    await anyio.sleep(plan.start_after_s)
    spec = RunSpec(
        models=plan.models,
        datasets=tuple(DatasetRef(d, "1.0.0") for d in plan.datasets),
        max_concurrency=plan.max_concurrency,
        repeat=plan.repeat,
        retry_policy=_FAST,
    )
    run = await rng.choice(apps).runs.create(TENANT, spec)
    if plan.cancel_after_s is not None:
        await anyio.sleep(plan.cancel_after_s)
        await rng.choice(apps).runs.cancel(TENANT, run.run_id)
    await _until_terminal(rng.choice(apps), run.run_id)
    done = await rng.choice(apps).runs.get(TENANT, run.run_id)
    if done.progress.counters.failed_permanent:
        try:  # retry the permanent failures once (of a cancelled run too); it must end again
            await rng.choice(apps).runs.retry(TENANT, run.run_id)
        except FailedPrecondition:
            pass
        else:
            await _until_terminal(rng.choice(apps), run.run_id)
    return run.run_id


async def _until_terminal(app: Evald, run_id: str) -> None:
    async for event in await app.runs.watch(TENANT, run_id, 0):
        del event


async def _run_shape(tmp_path: Path, seed: int) -> None:
    shape = _shape(seed)
    rng = random.Random(seed + 1)
    fault = FaultRate(Behaviour.error(400, message="rejected by the fake"), 0.1)
    async with FakeProvider(FakeConfig(latency_ms=2.0, faults=(fault,), seed=seed)) as fake:
        models: list[Any] = list(shape.models)
        models += [fake.model_config(m, max_concurrency=c) for m, c in shape.fake_models]
        config = make_config(
            tmp_path, models, max_inflight=shape.max_inflight, max_runs_in_flight_per_tenant=64
        )
        async with Evald.open(config, scoring=InlineScoring()) as app:
            for name, records in shape.datasets.items():
                await upload(app, name, records)
            stalls: list[str] = []
            run_ids: list[str] = []
            with anyio.fail_after(_SEED_BOUND_S):
                async with anyio.create_task_group() as monitor:
                    monitor.start_soon(_monitor_lanes, app, stalls)
                    async with anyio.create_task_group() as tg:

                        async def drive(plan: _RunPlan) -> None:
                            run_ids.append(await _drive([app], plan, rng))

                        for plan in shape.runs:
                            tg.start_soon(drive, plan)
                    monitor.cancel_scope.cancel()
            assert not stalls, f"seed {seed}: stalled lanes {stalls[:3]} in {shape}"
            for run_id in run_ids:
                run = await app.runs.get(TENANT, run_id)
                assert run.state.is_terminal, (seed, run)
                c = run.progress.counters
                assert c.pending == c.running == c.failed == 0, (seed, run)
                assert c.total == c.succeeded + c.failed_permanent + c.cancelled, (seed, run)
                for task in run.progress.tasks:
                    assert task.counters == await app.engine.store.recount_task(task.task_id)
            for state in app.engine.lane_states():
                assert (state.buffered, state.in_flight) == (0, 0), (seed, state)
            # Every claim came from a wake-up or a due retry, none from the re-check.
            assert app.engine.dispatcher.missed_wakeups == 0, seed


@pytest.mark.anyio
async def test_a_run_limit_over_two_models_lets_both_finish(tmp_path: Path) -> None:
    """The shape that wedged a model: two models of 4, one run over both limited to 2,
    then a later run on the second model alone."""
    config = make_config(
        tmp_path,
        [simulated_model("a", max_concurrency=4), simulated_model("b", max_concurrency=4)],
        max_inflight=16,
    )
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 40)
        ref = (DatasetRef("d", "1.0.0"),)
        with anyio.fail_after(30):
            both = await app.runs.create(
                TENANT, RunSpec(models=("a", "b"), datasets=ref, max_concurrency=2)
            )
            await _until_terminal(app, both.run_id)
            later = await app.runs.create(TENANT, RunSpec(models=("b",), datasets=ref))
            await _until_terminal(app, later.run_id)
        for run_id in (both.run_id, later.run_id):
            assert (await app.runs.get(TENANT, run_id)).state is RunState.SUCCEEDED


@pytest.mark.anyio
@pytest.mark.parametrize("seed", range(8))
async def test_random_shapes_all_finish_without_a_stalled_lane(tmp_path: Path, seed: int) -> None:
    await _run_shape(tmp_path, seed)


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("seed", range(100, 160))
async def test_random_shapes_all_finish_many_seeds(tmp_path: Path, seed: int) -> None:
    await _run_shape(tmp_path, seed)
