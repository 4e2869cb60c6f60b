"""A code task resumed after a crash runs only the programs without a stored verdict,
and never asks the model again; the ``[sandbox]`` table mirrors SandboxSettings."""

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_client import AsyncEvaldClient, Run, RunState
from evald_server.app import Evald
from evald_server.config import ConfigError, SandboxSection, ServerConfig, parse_config
from evald_server.domain import ErrorReason, TaskState
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


def _crash_before_scoring(store: Path, kept_runs: int) -> None:
    """The store as a crash leaves it: the task in scoring, ``kept_runs`` of its
    programs' runs stored, no result."""
    with sqlite3.connect(store) as db:
        kept = db.execute(
            "SELECT row_id FROM subtasks WHERE execution IS NOT NULL ORDER BY row_id LIMIT ?",
            (kept_runs,),
        ).fetchall()
        db.execute(
            f"UPDATE subtasks SET execution = NULL WHERE row_id NOT IN "
            f"({','.join(str(r[0]) for r in kept)})"
        )
        db.execute("UPDATE tasks SET state = 'scoring', result_status = NULL")
        db.execute("UPDATE runs SET state = 'running', finished_at = NULL")
        db.execute("DELETE FROM results")


async def _scored_after_restart(app: Evald, run_id: str) -> tuple[TaskState, TaskEvaluation]:
    (task,) = await app.store.get_tasks(run_id)
    with anyio.fail_after(120):
        while task.state is TaskState.SCORING:
            await anyio.sleep(0.05)
            fresh = await app.store.get_task(task.task_id)
            assert fresh is not None
            task = fresh
    ((_, body),) = await app.store.read_results(run_id)
    return task.state, TaskEvaluation.from_json(body)


async def _finished_run(config: ServerConfig, records: list[dict[str, Any]]) -> Run:
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=records)
        run = await client.create_run(models=["fake"], datasets=[("he", "1.0.0")], repeat=2)
        with anyio.fail_after(120):
            run = await client.wait(run.run_id)
    assert run.state is RunState.SUCCEEDED
    return run


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
        run = await _finished_run(config, records)
        calls = fake.journal.requests
        assert calls == 8
        _crash_before_scoring(tmp_path / "evald.sqlite3", kept_runs=3)
        async with Evald.open(config) as app:
            state, result = await _scored_after_restart(app, run.run_id)
            assert app.engine.code_runs.executed == 5  # the three stored runs were kept
        assert fake.journal.requests == calls  # no model was asked again
    assert state is TaskState.SUCCEEDED
    assert result.report is not None
    assert result.report.metrics["pass_at_1"] == 1.0


async def test_a_code_task_resumed_without_the_sandbox_fails_saying_so(tmp_path: Path) -> None:
    require_sandbox()
    records = humaneval_records()[:2]
    answers = {r["prompt"]: fenced(r["prompt"] + r["canonical_solution"]) for r in records}
    async with FakeProvider(answer=answering(answers)) as fake:
        data = config_data(
            tmp_path,
            models=[{"id": "fake", "provider": "openai", "base_url": fake.base_url}],
        )
        data["sandbox"] = sandbox_table()
        run = await _finished_run(parse_config(data), records)
        _crash_before_scoring(tmp_path / "evald.sqlite3", kept_runs=1)
        data["sandbox"] = sandbox_table(enabled=False)  # the operator turned it off
        async with Evald.open(parse_config(data)) as app:
            state, result = await _scored_after_restart(app, run.run_id)
            assert app.engine.code_runs.executed == 0
    assert state is TaskState.FAILED
    assert result.report is None
    (error,) = result.errors
    assert error.reason is ErrorReason.SCORER_FAILED
    assert "[sandbox] enabled = false" in error.message
    with sqlite3.connect(tmp_path / "evald.sqlite3") as db:
        stored = db.execute("SELECT COUNT(*) FROM subtasks WHERE execution IS NOT NULL")
        assert stored.fetchone() == (1,)  # the run stored before is kept
