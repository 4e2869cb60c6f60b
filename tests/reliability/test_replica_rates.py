"""Rate control across replicas: in-process engines on one PostgreSQL database and one
fake provider with a quota.

Two replicas declaring a model's requests a minute send that rate between them, not
each (the fake's journal counts the 429s); a run budget shared by two replicas ends the
run cancelled with the budget's reason, its overshoot within one balancing of the
other replica's spending plus the calls in flight; a replica that leaves hands its
share of a rate back, and each replica's statistics show the model's figures summed
over the live replicas, in progress events and on the dashboard too.
"""

import io
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from evald_cli._dashboard import RunView, render
from evald_client import Progress
from evald_server.app import DatasetRef, Evald, RetryPolicy, RunSpec
from evald_server.config import parse_config
from evald_server.domain import RunState
from evald_server.engine import RunBudget
from evald_server.engine._shares import BALANCE_EVERY_S
from evald_server.fake_provider import FakeConfig, FakeProvider, Quota
from tests._postgres import empty, pg_url
from tests._shared import wait_for
from tests.engine._support import TENANT, InlineScoring, upload, wait_until_finished
from tests.harness import config_data
from tests.reliability._cluster import cluster

__all__ = ["pg_url"]

pytestmark = pytest.mark.anyio
RETRIES = RetryPolicy(max_retries=30, backoff_s=(0.05,), jitter=0.0, retry_after_cap_s=0.5)
SPEC = {"datasets": (DatasetRef("ds", "1.0.0"),), "models": ("m1",), "retry_policy": RETRIES}


def _config(tmp_path: Path, pg_url: str, fake: FakeProvider, replica_id: str, **model: Any) -> Any:
    home = tmp_path / replica_id
    home.mkdir(exist_ok=True)
    data = config_data(home, models=[fake.model_config("m1", **model).model_dump()])
    data["server"] = {}
    data["store"] = {
        "url": pg_url,
        "replica_id": replica_id,
        "lease_s": 2.0,
        "heartbeat_s": 0.3,
        "pool_size": 4,
    }
    return parse_config(data)


@asynccontextmanager
async def replicas(
    tmp_path: Path, pg_url: str, fake: FakeProvider, *ids: str, **model: Any
) -> AsyncIterator[list[Evald]]:
    """In-process replicas on one emptied database, each with the same model config."""
    await empty(pg_url)
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(
                Evald.open(_config(tmp_path, pg_url, fake, rid, **model), scoring=InlineScoring())
            )
            for rid in ids
        ]


async def test_two_replicas_send_a_models_requests_a_minute_between_them(
    tmp_path: Path, pg_url: str
) -> None:
    # 600 a minute, one second deep at the fake; each replica alone would send 570.
    quota = Quota(requests_per_minute=600, burst_s=1.0)
    async with FakeProvider(FakeConfig(quotas={"m1": quota}, latency_ms=5)) as fake:
        async with replicas(
            tmp_path,
            pg_url,
            fake,
            "r1",
            "r2",
            max_concurrency=8,
            requests_per_minute=600,
            budget_burst_s=1.0,
        ) as (one, two):
            await upload(one, "ds", 40)
            runs = [await app.runs.create(TENANT, RunSpec(**SPEC)) for app in (one, two)]
            for app, run in zip((one, two), runs, strict=True):
                await wait_until_finished(app, run.run_id, timeout_s=120)
                assert (await app.runs.get(TENANT, run.run_id)).state is RunState.SUCCEEDED
            shares = [app.engine.rate_stats()[0].requests_share for app in (one, two)]
        outcomes = fake.journal.outcomes()
    assert outcomes["ok"] == 80
    # Two replicas each at the whole rate meet hundreds of 429s on this load; sharing
    # it, a call may still meet one where a share moved, rarely.
    assert outcomes.get("quota_requests", 0) <= 4, outcomes
    assert all(share is not None and share < 600 for share in shares), shares
    assert sum(s or 0.0 for s in shares) <= 600.0 + 1e-6


async def test_a_run_budget_shared_by_two_replicas_ends_the_run_within_its_bound(
    tmp_path: Path, pg_url: str
) -> None:
    # 2 calls in flight per replica (the model's 4, shared), 100 ms each: about 20 calls
    # a second per replica. The budget is 120 calls' worth of tokens.
    async with FakeProvider(FakeConfig(latency_ms=100)) as fake:
        async with replicas(tmp_path, pg_url, fake, "r1", "r2", max_concurrency=4) as (one, two):
            await upload(one, "ds", 1)
            probe = await one.runs.create(TENANT, RunSpec(**SPEC))
            await wait_until_finished(one, probe.run_id)
            per_call = await _tokens(one, probe.run_id)
            await upload(one, "big", 600)
            budget = RunBudget(max_tokens=120 * per_call)
            spec = RunSpec(**{**SPEC, "datasets": (DatasetRef("big", "1.0.0"),)}, budget=budget)
            run = await one.runs.create(TENANT, spec)

            async def both_calling() -> bool:
                return all(app.engine.rate_stats()[0].replicas == 2 for app in (one, two))

            await wait_for(both_calling, timeout_s=30)
            await wait_until_finished(two, run.run_id, timeout_s=120)
            done = await two.runs.get(TENANT, run.run_id)
            spent = await _tokens(two, run.run_id)
        calls = fake.journal.outcomes()["ok"] - 1
    assert done.state is RunState.CANCELLED
    assert done.cancel_reason is not None
    assert done.cancel_reason.startswith("budget reached: used "), done.cancel_reason
    assert budget.max_tokens is not None
    assert spent >= budget.max_tokens
    # The bound (docs/rate-limits-and-cost.md, "Across replicas"): a balancing period of
    # the other replica's calls (~20 a second, doubled for a loaded machine) and the
    # calls in flight on both; without the shared totals each replica spends the budget
    # on its own, twice it in all.
    bound = 2 * 20 * BALANCE_EVERY_S + 4
    assert calls <= 120 + bound, (calls, bound)
    assert spent <= budget.max_tokens + bound * per_call


async def test_a_leaving_replica_hands_its_rate_back_and_figures_sum_over_replicas(
    tmp_path: Path, pg_url: str
) -> None:
    adaptive = {"enabled": True, "min": 1, "start": 2}
    async with FakeProvider(FakeConfig(latency_ms=5)) as fake:
        model = {
            "max_concurrency": 8,
            "tokens_per_minute": 60_000,
            "adaptive_concurrency": adaptive,
        }
        async with replicas(tmp_path, pg_url, fake, "r1", **model) as (one,):
            second = Evald.open(
                _config(tmp_path, pg_url, fake, "r2", **model), scoring=InlineScoring()
            )
            async with second as two:

                async def halved() -> bool:
                    stats = [app.engine.rate_stats()[0] for app in (one, two)]
                    return all(
                        s.replicas == 2
                        and s.tokens_share is not None
                        and s.tokens_share < 60_000
                        and s.replicas_concurrency == 4  # 2 and 2
                        for s in stats
                    )

                await wait_for(halved, timeout_s=30)
                both = [app.engine.rate_stats()[0].tokens_share or 0.0 for app in (one, two)]
                assert sum(both) <= 60_000 + 1e-6

            async def whole() -> bool:  # r2 has left: its row is gone
                stats = one.engine.rate_stats()[0]
                return stats.replicas == 1 and stats.tokens_share == pytest.approx(60_000)

            await wait_for(whole, timeout_s=30)
            assert one.engine.rate_stats()[0].replicas_concurrency == 2


async def _tokens(app: Evald, run_id: str) -> int:
    """The run's durable token total (what every replica's outcomes moved)."""
    row = await app.engine.store.get_run(run_id)
    assert row is not None
    return row.cost.tokens


async def test_progress_and_dashboard_show_a_models_figures_over_the_replicas(
    tmp_path: Path, pg_url: str
) -> None:
    # Real server processes; the model's limit of 4 is 2 on each of the two replicas.
    async with cluster(tmp_path, pg_url, models=[("fa", 4)]) as nodes:
        await nodes.start("r1")
        await nodes.start("r2")
        run = await nodes.start_run("r1", 400, ["fa"])
        view = RunView.of(run)
        found = None
        async with nodes.client("r2") as watcher:
            with anyio.fail_after(60):
                async with aclosing(watcher.watch(run.run_id)) as events:
                    async for event in events:
                        view.apply(event)
                        if isinstance(event, Progress) and event.models:
                            (activity,) = event.models
                            # Once both have balanced: 2 each, 4 in all.
                            figures = (
                                activity.replicas,
                                activity.concurrency_limit,
                                activity.replicas_concurrency_limit,
                            )
                            if figures == (2, 2, 4):
                                found = activity
                                break
            await watcher.cancel_run(run.run_id)
    assert found is not None
    console = Console(file=io.StringIO(), width=200, force_terminal=True, record=True)
    console.print(render(view))
    assert "2 of 4 on 2 replicas" in console.export_text()
