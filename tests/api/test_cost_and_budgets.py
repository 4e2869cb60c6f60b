"""Cost accounting and run budgets through the gRPC server, the SDK and the fake
provider (its quota mode and its usage reporting): the run's cost is exactly Σ usage ×
price over the fake's journal; unknown usage is estimated and says so; a budget stops
the run, cancelled with its reason, its finished work scored, within the calls then in
flight, and holds across a restart."""

import io
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from rich.console import Console

from evald_cli._dashboard import RunView, render
from evald_cli._render import cost_text
from evald_cli.main import main as cli_main
from evald_client import (
    AsyncEvaldClient,
    Budget,
    Progress,
    RetryPolicy,
    RunState,
    SubtaskState,
)
from evald_server.fake_provider import FakeConfig, FakeProvider, JournalEntry, Quota
from tests._shared import classification_records
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio
PRICE = {"input_per_million": 2.0, "output_per_million": 8.0}
RETRIES = RetryPolicy(
    max_retries=2, max_rate_limited_retries=50, backoff_s=(0.02,), retry_after_cap_s=0.2
)


def _bill(entries: list[JournalEntry]) -> tuple[float, int]:
    """What the fake's answers cost at PRICE, and their tokens, from its journal."""
    answered = [e for e in entries if e.outcome == "ok"]
    prompt = sum(e.prompt_tokens or 0 for e in answered)
    completion = sum(e.completion_tokens or 0 for e in answered)
    return (prompt * 2 + completion * 8) / 1e6, prompt + completion


def _model(fake: FakeProvider, **fields: Any) -> dict[str, Any]:
    return fake.model_config("m1", price=PRICE, **fields).model_dump()


async def _upload(client: AsyncEvaldClient, records: int) -> None:
    await client.upload_dataset(
        name="d",
        version="1.0.0",
        task_type="classification",
        records=classification_records(records, prefix="c"),
    )


async def test_the_runs_cost_is_the_journals_usage_times_the_price(tmp_path: Path) -> None:
    # A quota that answers some calls 429: those are retried and cost nothing.
    quota = Quota(requests_per_minute=1200, burst_s=0.25)
    async with FakeProvider(FakeConfig(quotas={"m1": quota})) as fake:
        config = make_config(tmp_path, models=[_model(fake, max_concurrency=8)])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await _upload(client, 40)
            run = await client.create_run(
                models=["m1"], datasets=[("d", "1.0.0")], retry_policy=RETRIES
            )
            done = await client.wait(run.run_id, timeout_s=60)
            (result,) = await client.results(run.run_id)
            samples = [s async for s in client.samples(run.run_id)]
        entries = list(fake.journal.entries)
    assert done.state is RunState.SUCCEEDED
    assert any(e.status == 429 for e in entries)  # the quota did bite
    usd, tokens = _bill(entries)
    cost = done.progress.cost
    assert cost is not None
    assert (cost.cost_usd, cost.tokens, cost.estimated, cost.priced) == (usd, tokens, False, True)
    assert result.execution.cost == cost  # one task: the task's cost is the run's
    assert all(s.cost is not None and not s.cost.estimated for s in samples)
    assert sum(s.cost.tokens for s in samples if s.cost) == tokens
    assert sum(s.cost.cost_usd for s in samples if s.cost) == pytest.approx(usd, rel=1e-12)


async def test_unreported_usage_is_estimated_and_marked(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(send_usage=False)) as fake:
        config = make_config(tmp_path, models=[_model(fake)])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await _upload(client, 5)
            run = await client.create_run(models=["m1"], datasets=[("d", "1.0.0")])
            done = await client.wait(run.run_id, timeout_s=60)
            samples = [s async for s in client.samples(run.run_id)]
    cost = done.progress.cost
    assert cost is not None
    assert cost.estimated
    assert cost.priced
    assert cost.tokens > 0
    assert cost.cost_usd > 0
    for sample in samples:
        assert sample.prompt_tokens is None  # unknown: the counts are not invented
        assert sample.cost is not None
        assert sample.cost.estimated
        # 4 characters a token, rounded up: the prompt and the answer, priced.
        assert sample.cost.tokens >= -(-len(sample.output) // 4) + 1


async def test_a_cost_budget_stops_the_run_within_the_calls_in_flight(tmp_path: Path) -> None:
    concurrency = 4
    async with FakeProvider(FakeConfig(latency_ms=20)) as fake:
        config = make_config(tmp_path, models=[_model(fake, max_concurrency=concurrency)])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await _upload(client, 300)
            # What about 20 answers cost (each is ~20 tokens here): far from all 300.
            budget = 20 * 20 * 4e-6
            run = await client.create_run(
                models=["m1"], datasets=[("d", "1.0.0")], budget=Budget(max_cost_usd=budget)
            )
            cancelled = None
            with anyio.fail_after(60):
                async with aclosing(client.watch(run.run_id)) as events:
                    async for event in events:
                        if getattr(event, "cancel_reason", ""):
                            cancelled = event
            done = await client.get_run(run.run_id)
            (result,) = await client.results(run.run_id)
        entries = list(fake.journal.entries)
    assert done.state is RunState.CANCELLED
    assert done.cancel_reason.startswith("budget reached: spent ")
    assert "max_cost_usd" in done.cancel_reason
    assert cancelled is not None  # the state change that recorded it says why
    cost = done.progress.cost
    assert cost is not None
    assert cost.cost_usd >= budget
    answered = sorted((e for e in entries if e.outcome == "ok"), key=lambda e: e.finished_at or 0)
    # The answers needed to reach the budget, plus at most the calls then in flight.
    spent, needed = 0.0, 0
    for entry in answered:
        spent += ((entry.prompt_tokens or 0) * 2 + (entry.completion_tokens or 0) * 8) / 1e6
        needed += 1
        if spent >= budget:
            break
    assert needed <= len(answered) <= needed + concurrency
    assert (cost.cost_usd, cost.tokens) == _bill(entries)  # every answer paid is counted
    # The finished work is scored; the rest was never sent.
    assert result.execution.samples_succeeded == len(answered)
    assert result.execution.samples_cancelled == 300 - len(answered)
    assert done.progress.counts.succeeded == len(answered)


async def test_a_token_budget_holds_across_a_restart(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=60)) as fake:
        config = make_config(tmp_path, models=[_model(fake, max_concurrency=2)])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await _upload(client, 200)
            first_answer = None
            run = await client.create_run(
                models=["m1"], datasets=[("d", "1.0.0")], budget=Budget(max_tokens=600)
            )
            with anyio.fail_after(30):  # stop the server when about half is spent
                while True:
                    now = await client.get_run(run.run_id)
                    cost = now.progress.cost
                    if cost is not None and cost.tokens >= 300:
                        first_answer = cost.tokens
                        break
                    await anyio.sleep(0.02)
        assert first_answer is not None
        assert first_answer < 600
        # The same database, a new server: it resumes the run from the stored total.
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            done = await client.wait(run.run_id, timeout_s=60)
            samples = [s async for s in client.samples(run.run_id)]
        entries = list(fake.journal.entries)
    assert done.state is RunState.CANCELLED
    assert done.cancel_reason.startswith("budget reached: used ")
    cost = done.progress.cost
    assert cost is not None
    succeeded = [s for s in samples if s.state is SubtaskState.SUCCEEDED]
    per_call = max(s.cost.tokens for s in succeeded if s.cost)
    # Spent once, not once per process: 600 and at most the calls in flight (2) over.
    assert 600 <= cost.tokens <= 600 + 2 * per_call
    assert cost.tokens == sum(s.cost.tokens for s in succeeded if s.cost)
    assert len([e for e in entries if e.outcome == "ok"]) >= len(succeeded)


async def test_progress_events_carry_the_runs_cost(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=5)) as fake:
        config = make_config(tmp_path, models=[_model(fake)])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await _upload(client, 60)
            run = await client.create_run(models=["m1"], datasets=[("d", "1.0.0")])
            seen = []
            with anyio.fail_after(60):
                async with aclosing(client.watch(run.run_id)) as events:
                    async for event in events:
                        if isinstance(event, Progress) and event.progress.cost is not None:
                            seen.append(event.progress.cost.tokens)
            done = await client.get_run(run.run_id)
    assert seen
    assert seen == sorted(seen)
    assert done.progress.cost is not None
    assert seen[-1] <= done.progress.cost.tokens


SPEC = """
models = ["m1"]
datasets = ["d@1.0.0"]

[retry_policy]
max_retries = 1
max_rate_limited_retries = 30
backoff_s = [0.02]

[budget]
max_tokens = 200
"""


async def test_the_cli_submits_budgets_and_shows_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`evald submit` takes the budget and retry keys of a spec file; `evald results`
    and the dashboard show what the run cost and why it stopped."""
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC, encoding="utf-8")
    async with FakeProvider(FakeConfig(latency_ms=10)) as fake:
        config = make_config(tmp_path, models=[_model(fake, max_concurrency=2)])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await _upload(client, 100)
            code = await anyio.to_thread.run_sync(
                cli_main, ["submit", str(spec), "--server", address]
            )
            assert code == 0
            run_id = capsys.readouterr().out.strip()
            done = await client.wait(run_id, timeout_s=60)
            assert done.spec.budget == Budget(max_tokens=200)
            assert done.spec.retry_policy.max_rate_limited_retries == 30
            assert done.state is RunState.CANCELLED
            code = await anyio.to_thread.run_sync(
                cli_main, ["results", run_id, "--server", address]
            )
            table = capsys.readouterr().out
            (result,) = await client.results(run_id)
            view = RunView.of(done)
    assert code == 0
    assert result.execution.cost is not None
    assert "cost" in table
    assert cost_text(result.execution.cost) in table  # e.g. $0.0009
    console = Console(file=io.StringIO(), width=250, force_terminal=True, record=True)
    console.print(render(view))
    dashboard = console.export_text()
    assert f"cost {cost_text(done.progress.cost)}" in dashboard
    assert "budget reached: used " in dashboard
