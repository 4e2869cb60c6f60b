"""What a model is doing is visible while it happens, through the gRPC server and SDK:

* a model that cannot be reached shows its latest error and its consecutive failed
  calls in progress events (and on the dashboard) within seconds, while its retries
  are pending; the results table then names the failure reasons of the failed task;
* a stalled lane (ready work, no call in flight, for longer than the threshold) is a
  warning in the log with its state and is shown in progress events and on the
  dashboard, whatever the cause (here: the server-wide limit held by hanging calls).
"""

import io
import logging
import socket
import time
from contextlib import aclosing
from pathlib import Path

import anyio
import pytest
from rich.console import Console

from evald_cli._dashboard import PlainLines, RunView, render
from evald_cli._render import results_tables
from evald_client import AsyncEvaldClient, Progress, RetryPolicy, RunState
from evald_server.fake_provider import FakeConfig, FakeProvider
from tests._shared import classification_records, simulated_model, wait_for
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _unreachable(model_id: str, port: int) -> dict[str, object]:
    return {
        "id": model_id,
        "provider": "openai",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "max_concurrency": 2,
        "timeout_s": 5.0,
    }


async def test_an_unreachable_model_says_so_within_seconds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="evald_server.engine._engine")
    port = _closed_port()
    config = make_config(tmp_path, models=[_unreachable("gone", port)])
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="d",
            version="1.0.0",
            task_type="classification",
            records=classification_records(4, prefix="c"),
        )
        # The default retry policy: the first retry is 5 s (±50 %) away.
        run = await client.create_run(models=["gone"], datasets=[("d", "1.0.0")])
        view = RunView.of(run)
        started = time.monotonic()
        found: Progress | None = None
        with anyio.fail_after(10):
            async with aclosing(client.watch(run.run_id)) as events:
                async for event in events:
                    view.apply(event)
                    if isinstance(event, Progress) and event.models:
                        (model,) = event.models
                        if model.consecutive_failures > 0:
                            found = event
                            break
        assert found is not None
        assert time.monotonic() - started < 5.0, "reported before the first retry"
        (model,) = found.models
        assert model.model_id == "gone"
        assert model.last_error is not None
        assert model.last_error.reason == "PROVIDER_CONNECTION_ERROR"
        assert f"127.0.0.1:{port}" in model.last_error.message
        assert model.last_error_time is not None
        assert found.progress.counts.retrying + found.progress.counts.queued > 0
        console = Console(file=io.StringIO(), width=200, force_terminal=True, record=True)
        console.print(render(view))
        text = console.export_text()
        assert "failed call(s) in a row" in text
        assert "PROVIDER_CONNECTION_ERROR" in text
        plain = io.StringIO()
        PlainLines(Console(file=plain, width=300, force_terminal=False)).show(view, found)
        assert "model gone: " in plain.getvalue()
        assert "PROVIDER_CONNECTION_ERROR" in plain.getvalue()

        async def logged() -> bool:  # the server log says so too, once per streak
            return any("model gone: " in r.getMessage() for r in caplog.records)

        await wait_for(logged, timeout_s=5, every_s=0.05)
        (line,) = [r.getMessage() for r in caplog.records if "model gone: " in r.getMessage()]
        assert "consecutive failed calls" in line
        assert f"127.0.0.1:{port}" in line
        await client.cancel_run(run.run_id)


async def test_the_results_table_names_why_a_task_failed(tmp_path: Path) -> None:
    port = _closed_port()
    config = make_config(tmp_path, models=[_unreachable("gone", port)])
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="d",
            version="1.0.0",
            task_type="classification",
            records=classification_records(3, prefix="c"),
        )
        run = await client.create_run(
            models=["gone"], datasets=[("d", "1.0.0")], retry_policy=RetryPolicy(max_retries=0)
        )
        final = await client.wait(run.run_id, timeout_s=30)
        assert final.state is RunState.FAILED
        console = Console(file=io.StringIO(), width=200, force_terminal=True, record=True)
        for table in results_tables(await client.results(run.run_id)):
            console.print(table)
        text = console.export_text()
        assert "failure reasons" in text
        assert "PROVIDER_CONNECTION_ERROR" in text


async def test_a_stalled_model_is_logged_and_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One server-wide slot, held by a call that hangs: the other model has work and
    can start nothing. That is a stall, and it must be seen."""
    async with FakeProvider(FakeConfig(latency_ms=60_000)) as fake:
        hang = fake.model_config("hang", max_concurrency=1).model_dump(mode="json")
        config = make_config(
            tmp_path,
            models=[hang, simulated_model("other", latency_ms=1)],
            limits={"max_inflight": 1},
        )
        config = config.model_copy(
            update={"server": config.server.model_copy(update={"stall_warning_s": 0.5})}
        )
        caplog.set_level(logging.WARNING, logger="evald_server.engine._engine")
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="d",
                version="1.0.0",
                task_type="classification",
                records=classification_records(4, prefix="c"),
            )
            first = await client.create_run(models=["hang"], datasets=[("d", "1.0.0")])
            await fake.wait_until(lambda j: j.in_flight("hang") == 1, timeout_s=30)
            second = await client.create_run(models=["other"], datasets=[("d", "1.0.0")])
            view = RunView.of(second)
            stalled: Progress | None = None
            with anyio.fail_after(15):
                async with aclosing(client.watch(second.run_id)) as events:
                    async for event in events:
                        view.apply(event)
                        if isinstance(event, Progress) and any(
                            m.stalled_since is not None for m in event.models
                        ):
                            stalled = event
                            break
            assert stalled is not None
            (model,) = stalled.models
            assert model.model_id == "other"
            assert "max_inflight" in model.waiting_on
            assert model.queued > 0
            assert model.in_flight == 0
            warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
            assert any(
                "model other stalled" in w and "max_inflight" in w and second.run_id in w
                for w in warnings
            ), warnings
            console = Console(file=io.StringIO(), width=200, force_terminal=True, record=True)
            console.print(render(view))
            assert "stalled since" in console.export_text()
            await client.cancel_run(first.run_id)
            final = await client.wait(second.run_id, timeout_s=30)
            assert final.state is RunState.SUCCEEDED, "the stall ends when the slot frees"
