"""A code task resumed after a crash runs only the programs without a stored verdict,
and never asks the model again; the ``[sandbox]`` table mirrors SandboxSettings."""

import dataclasses
import sqlite3
from pathlib import Path

import anyio
import pytest

from evald_client import AsyncEvaldClient, RunState
from evald_server.app import Evald
from evald_server.config import ConfigError, SandboxSection, parse_config
from evald_server.domain import TaskState
from evald_server.engine import TaskEvaluation
from evald_server.engine._code_runs import sandbox_of
from evald_server.fake_provider import FakeProvider
from evald_server.sandbox import SandboxSettings
from tests.code_runs._support import answering, fenced, humaneval_records, sandbox_table
from tests.harness import config_data, running_server
from tests.sandbox._support import require_sandbox

pytestmark = pytest.mark.anyio


def test_the_sandbox_table_has_the_settings_keys_and_defaults() -> None:
    settings = {f.name: f.default for f in dataclasses.fields(SandboxSettings)}
    section = {name: field.default for name, field in SandboxSection.model_fields.items()}
    assert section == settings


def test_a_setting_the_sandbox_refuses_is_a_config_error_naming_the_key() -> None:
    section = SandboxSection(enabled=True, python="/opt/python3")
    with pytest.raises(ConfigError, match=r"sandbox\.python: /opt/python3 is not under"):
        sandbox_of(section)
    assert sandbox_of(SandboxSection()) is None  # off: no sandbox at all


async def test_a_resumed_code_task_runs_only_the_programs_without_a_verdict(
    tmp_path: Path,
) -> None:
    require_sandbox()
    records = humaneval_records()[:4]
    answers = {r["prompt"]: fenced(r["prompt"] + r["canonical_solution"]) for r in records}
    async with FakeProvider(answer=answering(answers)) as fake:
        data = config_data(
            tmp_path,
            models=[{"id": "fake", "provider": "openai", "base_url": fake.base_url}],
        )
        data["sandbox"] = sandbox_table()
        config = parse_config(data)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="he", version="1.0.0", task_type="code", records=records
            )
            run = await client.create_run(models=["fake"], datasets=[("he", "1.0.0")], repeat=2)
            with anyio.fail_after(120):
                run = await client.wait(run.run_id)
            assert run.state is RunState.SUCCEEDED
            (first,) = await client.results(run.run_id)
        calls = fake.journal.requests
        assert calls == 8

        # A crash after three of the eight runs were stored, before the task was scored.
        store = tmp_path / "evald.sqlite3"
        with sqlite3.connect(store) as db:
            kept = db.execute(
                "SELECT row_id FROM subtasks WHERE execution IS NOT NULL ORDER BY row_id LIMIT 3"
            ).fetchall()
            db.execute(
                f"UPDATE subtasks SET execution = NULL WHERE row_id NOT IN "
                f"({','.join(str(r[0]) for r in kept)})"
            )
            db.execute("UPDATE tasks SET state = 'scoring', result_status = NULL")
            db.execute("UPDATE runs SET state = 'running', finished_at = NULL")
            db.execute("DELETE FROM results")

        async with Evald.open(config) as app:
            (task,) = await app.store.get_tasks(run.run_id)
            with anyio.fail_after(120):
                while task.state is TaskState.SCORING:
                    await anyio.sleep(0.05)
                    fresh = await app.store.get_task(task.task_id)
                    assert fresh is not None
                    task = fresh
            assert app.engine.code_runs.executed == 5  # the three stored runs were kept
            ((_, body),) = await app.store.read_results(run.run_id)
            second = TaskEvaluation.from_json(body)
        assert fake.journal.requests == calls  # no model was asked again
    assert first.metrics["pass_at_1"] == 1.0
    assert task.state is TaskState.SUCCEEDED
    assert second.report is not None
    assert second.report.metrics["pass_at_1"] == 1.0
