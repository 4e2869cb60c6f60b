"""Rate control through the whole service against the fake provider's quota mode:
request and token budgets, the provider's headers, AIMD against a hidden capacity."""

from pathlib import Path
from typing import Any

import pytest

from evald_server.app import DatasetRef, Evald, RetryPolicy, RunSpec
from evald_server.config import ConfigError, GenerationParams
from evald_server.domain import RunState
from evald_server.engine import MODEL_LIMIT
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate, Quota
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished

pytestmark = pytest.mark.anyio
RETRIES = RetryPolicy(max_retries=20, backoff_s=(0.05,), jitter=0.0, retry_after_cap_s=0.5)


async def _run(
    fake: FakeProvider,
    tmp_path: Path,
    records: int,
    *,
    runs: int = 1,
    params: GenerationParams | None = None,
    **model: Any,
) -> None:
    config = make_config(tmp_path, [fake.model_config("m1", **model)])
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "ds", records)
        spec = RunSpec(
            models=("m1",),
            datasets=(DatasetRef("ds", "1.0.0"),),
            retry_policy=RETRIES,
            params=params,
        )
        created = [await app.runs.create(TENANT, spec) for _ in range(runs)]
        for run in created:
            await wait_until_finished(app, run.run_id, timeout_s=60)
            assert (await app.runs.get(TENANT, run.run_id)).state is RunState.SUCCEEDED


async def test_a_requests_budget_keeps_every_run_under_the_quota(tmp_path: Path) -> None:
    # 600 a minute, one second deep on both sides; two runs share the model's budget.
    quota = Quota(requests_per_minute=600, burst_s=1.0)
    async with FakeProvider(FakeConfig(quotas={"m1": quota})) as fake:
        await _run(
            fake,
            tmp_path,
            15,
            runs=2,
            max_concurrency=8,
            requests_per_minute=600,
            budget_burst_s=1.0,
        )
        outcomes = fake.journal.outcomes()
    assert outcomes == {"ok": 30}


async def test_without_a_budget_the_same_load_meets_429s(tmp_path: Path) -> None:
    """The control for the test above: the quota does bite this load."""
    quota = Quota(requests_per_minute=600, burst_s=1.0)
    async with FakeProvider(FakeConfig(quotas={"m1": quota}, latency_ms=1)) as fake:
        await _run(fake, tmp_path, 15, runs=2, max_concurrency=8)
        outcomes = fake.journal.outcomes()
    assert outcomes["ok"] == 30
    assert outcomes.get("quota_requests", 0) > 0


async def test_a_tokens_budget_counts_prompt_and_max_tokens(tmp_path: Path) -> None:
    quota = Quota(tokens_per_minute=12_000, burst_s=1.0)  # 200 tokens a second
    async with FakeProvider(FakeConfig(quotas={"m1": quota})) as fake:
        await _run(
            fake,
            tmp_path,
            20,
            max_concurrency=8,
            tokens_per_minute=12_000,
            budget_burst_s=1.0,
            params=GenerationParams(max_tokens=20),
        )
        outcomes = fake.journal.outcomes()
    assert outcomes == {"ok": 20}


async def test_the_providers_headers_slow_calls_down_before_a_429(tmp_path: Path) -> None:
    # No budget declared: evald learns the quota from x-ratelimit-* alone.
    quota = Quota(requests_per_minute=240, burst_s=1.0)  # 4 deep, 4 a second
    async with FakeProvider(FakeConfig(quotas={"m1": quota})) as fake:
        await _run(fake, tmp_path, 10, max_concurrency=1)
        outcomes = fake.journal.outcomes()
    assert outcomes == {"ok": 10}


async def test_aimd_backs_off_a_hidden_capacity_and_reports_its_state(tmp_path: Path) -> None:
    adaptive = {"enabled": True, "min": 1, "start": 1, "cooldown_s": 0.2}
    config = FakeConfig(max_concurrent=4, latency_ms=30)
    async with FakeProvider(config) as fake:
        cfg = make_config(
            tmp_path,
            [fake.model_config("m1", max_concurrency=16, adaptive_concurrency=adaptive)],
        )
        async with Evald.open(cfg, scoring=InlineScoring()) as app:
            await upload(app, "ds", 150)
            spec = RunSpec(
                models=("m1",), datasets=(DatasetRef("ds", "1.0.0"),), retry_policy=RETRIES
            )
            run = await app.runs.create(TENANT, spec)
            events = await wait_until_finished(app, run.run_id, timeout_s=60)
            (stats,) = [s for s in app.engine.limiter_stats() if s.name == MODEL_LIMIT]
            (rate,) = app.engine.rate_stats()
        outcomes = fake.journal.outcomes()
    assert outcomes["ok"] == 150
    assert stats.episodes >= 1
    assert (stats.min_capacity, stats.max_capacity) == (1, 16)
    assert 1 <= stats.capacity <= 6  # near C = 4 after the episodes, nowhere near 16
    assert rate.adaptive
    assert not rate.slow_start
    assert rate.rate_limited == outcomes["over_capacity"]
    # The 429s are the probes of each episode, not a storm: far fewer than the calls.
    assert outcomes["over_capacity"] < 150 * 0.25
    assert events  # the run was watched to its end


async def test_one_burst_of_429s_is_one_decrease(tmp_path: Path) -> None:
    """Start at 2 C with twice as many workers: the first burst of 429s is one
    episode. The 429'd call's slot used to be handed to a waiting call before the
    decrease applied, so that call went out at the old value, met a 429 and counted
    as a second episode (4 -> 3 here)."""
    adaptive = {"enabled": True, "min": 1, "start": 8, "decrease_factor": 0.8, "cooldown_s": 60}
    async with FakeProvider(FakeConfig(max_concurrent=4, latency_ms=50)) as fake:
        cfg = make_config(
            tmp_path,
            [fake.model_config("m1", max_concurrency=16, adaptive_concurrency=adaptive)],
        )
        async with Evald.open(cfg, scoring=InlineScoring()) as app:
            await upload(app, "ds", 40)
            spec = RunSpec(
                models=("m1",), datasets=(DatasetRef("ds", "1.0.0"),), retry_policy=RETRIES
            )
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id, timeout_s=60)
            (rate,) = app.engine.rate_stats()
        outcomes = fake.journal.outcomes()
    assert outcomes["ok"] == 40
    assert outcomes["over_capacity"] >= 1  # the burst happened
    # One decrease, from the 5 in flight when the first 429'd call went out to
    # floor(5 * 0.8) = 4 = C; then no call exceeds C again (the cool-down
    # holds the value there for the whole run).
    assert (rate.episodes, rate.concurrency) == (1, 4)


def test_start_above_the_bounds_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="adaptive_concurrency"):
        make_config(
            tmp_path,
            [
                {
                    "id": "m1",
                    "provider": "simulated",
                    "max_concurrency": 4,
                    "adaptive_concurrency": {"enabled": True, "start": 8},
                }
            ],
        )


async def test_hostile_headers_neither_hold_the_model_for_decades_nor_become_its_budget(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Every answer says: nothing left until 10^9 s from now, and a limit of 0.001 a minute.
    hostile = Behaviour.scripted(
        headers={
            "x-ratelimit-limit-requests": "0.001",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1e9",
            "x-ratelimit-limit-tokens": "0",
        }
    )
    async with FakeProvider(FakeConfig(faults=(FaultRate(hostile, 1.0),))) as fake:
        config = make_config(
            tmp_path, [fake.model_config("m1", max_concurrency=1, rate_limit_reset_cap_s=0.05)]
        )
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "ds", 4)
            spec = RunSpec(models=("m1",), datasets=(DatasetRef("ds", "1.0.0"),))
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id, timeout_s=60)
            assert (await app.runs.get(TENANT, run.run_id)).state is RunState.SUCCEEDED
            (rate,) = app.engine.rate_stats()
        assert fake.journal.outcomes() == {"scripted": 4}
    assert rate.held_until_s <= 0.05  # the cap, not 10^9 s
    assert not rate.learned
    assert (rate.requests_per_minute, rate.tokens_per_minute) == (None, None)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    for header in ("x-ratelimit-limit-requests", "x-ratelimit-reset-requests"):
        named = [w for w in warnings if f"provider header {header}:" in w]
        assert len(named) == 1, warnings  # once, not at every answer
    assert any("x-ratelimit-limit-tokens: 0 ignored: below the floor" in w for w in warnings)
