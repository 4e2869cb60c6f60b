"""Adaptive concurrency is visible through the gRPC server and SDK: each model's limit
now, its bounds and its rate-limit episodes in progress events and on the dashboard."""

import io
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from evald_cli._dashboard import RunView, render
from evald_client import AsyncEvaldClient, Progress, RetryPolicy
from evald_server.fake_provider import FakeConfig, FakeProvider
from tests._shared import classification_records
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio


async def test_progress_and_dashboard_show_the_adaptive_limit_and_its_episodes(
    tmp_path: Path,
) -> None:
    async with FakeProvider(FakeConfig(max_concurrent=2, latency_ms=40)) as fake:
        model = fake.model_config(
            "m1",
            max_concurrency=16,
            adaptive_concurrency={"enabled": True, "min": 1, "start": 4},
        ).model_dump()
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="d",
                version="1.0.0",
                task_type="classification",
                records=classification_records(60, prefix="c"),
            )
            run = await client.create_run(
                models=["m1"],
                datasets=[("d", "1.0.0")],
                retry_policy=RetryPolicy(max_retries=20, backoff_s=(0.05,), jitter_fraction=0.0),
            )
            view = RunView.of(run)
            found = None
            with anyio.fail_after(30):
                async with aclosing(client.watch(run.run_id)) as events:
                    async for event in events:
                        view.apply(event)
                        if isinstance(event, Progress) and event.models:
                            (activity,) = event.models
                            if activity.rate_limit_episodes >= 1:
                                found = activity
                                break
            assert found is not None
            assert found.adaptive
            assert (found.concurrency_min, found.concurrency_max) == (1, 16)
            assert 1 <= found.concurrency_limit < 16
            console = Console(file=io.StringIO(), width=200, force_terminal=True, record=True)
            console.print(render(view))
            text = console.export_text()
            assert f"{found.concurrency_limit} (AIMD 1–16, " in text
            await client.cancel_run(run.run_id)
