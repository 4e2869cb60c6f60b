"""RescoreRun of a code run: the stored answers' programs run again in this server's
sandbox, as configured now (no model call); on a server without a sandbox the rescore is
refused like a code run's CreateRun."""

from pathlib import Path

import anyio
import pytest

from evald_client import CodePayload, FailedPrecondition, RunState
from tests.code_runs._support import code_server
from tests.code_runs.test_code_runs import _subset

pytestmark = pytest.mark.anyio


async def test_a_code_rescore_runs_the_stored_programs_again_without_a_model_call(
    tmp_path: Path,
) -> None:
    records, answers, expected = _subset()
    async with code_server(tmp_path, answers) as (client, _address, fake):
        await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=records)
        source = await client.create_run(models=["fake"], datasets=[("he", "1.0.0")], repeat=2)
        with anyio.fail_after(120):
            source = await client.wait(source.run_id)
        asked = len(fake.journal.entries)

        run = await client.rescore_run(source.run_id, reducers=["pass@2"])
        with anyio.fail_after(120):
            run = await client.wait(run.run_id)
        (result,) = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
        before = [s async for s in client.samples(source.run_id)]
    assert len(fake.journal.entries) == asked
    assert run.state is RunState.SUCCEEDED
    assert isinstance(result.payload, CodePayload)
    assert [(p.k, p.value) for p in result.payload.pass_at_k] == [(1, 0.5), (2, 0.5)]
    verdicts = {(s.record_id, s.repeat_index): s.execution.verdict for s in samples if s.execution}
    assert verdicts == {
        (s.record_id, s.repeat_index): s.execution.verdict for s in before if s.execution
    }
    assert {rid: v for (rid, _), v in verdicts.items()} == expected


async def test_a_code_rescore_is_refused_where_the_sandbox_is_off(tmp_path: Path) -> None:
    records, answers, _ = _subset()
    async with code_server(tmp_path, answers) as (client, _address, _fake):
        await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=records)
        source = await client.create_run(models=["fake"], datasets=[("he", "1.0.0")])
        with anyio.fail_after(120):
            source = await client.wait(source.run_id)
    async with code_server(tmp_path, answers, sandbox={"enabled": False}) as (client, _, fake):
        with pytest.raises(FailedPrecondition, match=r"sandbox is not enabled"):
            await client.rescore_run(source.run_id)
        assert len(fake.journal.entries) == 0
