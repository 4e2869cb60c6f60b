"""A code run on PostgreSQL: the verdicts are stored per sample through the shared store
layer's PostgreSQL dialect, read back by ListSamples, and scored."""

from pathlib import Path

import anyio
import pytest

from evald_client import CodePayload, RunState
from tests._postgres import new_database, pg_url
from tests.code_runs._support import code_server, fenced, humaneval_records

pytestmark = pytest.mark.anyio
__all__ = ["pg_url"]


async def test_a_code_run_stores_its_verdicts_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    records = humaneval_records()[:3]
    raises = f"def {records[1]['entry_point']}(*args):\n    raise ValueError\n"
    answers = {
        records[0]["prompt"]: fenced(records[0]["prompt"] + records[0]["canonical_solution"]),
        records[1]["prompt"]: fenced(raises),
        records[2]["prompt"]: "```text\nno code here\n```",
    }
    async with (
        new_database(pg_url, "code") as url,
        code_server(tmp_path, answers, store_url=url) as (client, _address, _fake),
    ):
        await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=records)
        run = await client.create_run(
            models=["fake"], datasets=[("he", "1.0.0")], repeat=2, reducers=["pass@2"]
        )
        with anyio.fail_after(120):
            run = await client.wait(run.run_id)
        assert run.state is RunState.SUCCEEDED
        (result,) = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
    verdicts = sorted((s.record_id, s.execution.verdict) for s in samples if s.execution)
    assert verdicts == [
        ("1", "passed"),
        ("1", "passed"),
        ("2", "error"),
        ("2", "error"),
        ("3", "no_program"),
        ("3", "no_program"),
    ]
    assert isinstance(result.payload, CodePayload)
    assert result.metrics["pass_at_1"] == pytest.approx(1 / 3)
    assert result.metrics["pass_at_2"] == pytest.approx(1 / 3)
