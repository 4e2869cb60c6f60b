"""A model removed from the config across a restart: its unfinished work fails for good
with MODEL_NOT_FOUND, its task is scored on what finished, and the run ends."""

from pathlib import Path

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.domain import EventKind, ResultStatus, RunState, TaskState
from tests._shared import simulated_model
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished


@pytest.mark.anyio
async def test_a_model_gone_after_a_restart_fails_its_work_and_the_run_ends(
    tmp_path: Path,
) -> None:
    both = make_config(
        tmp_path, [simulated_model("kept"), simulated_model("gone", latency_ms=60_000)]
    )
    both = both.model_copy(update={"server": both.server.model_copy(update={"grace_s": 0.2})})
    async with Evald.open(both, scoring=InlineScoring()) as app:
        await upload(app, "d", 3)
        spec = RunSpec(models=("kept", "gone"), datasets=(DatasetRef("d", "1.0.0"),))
        run = await app.runs.create(TENANT, spec)
        with anyio.fail_after(30):
            async for event in await app.runs.watch(TENANT, run.run_id):
                if event.kind is EventKind.TASK_SCORED:
                    break
    # Restart without "gone": its calls were released by the drain, never answered.
    only_kept = make_config(tmp_path, [simulated_model("kept")])
    async with Evald.open(only_kept, scoring=InlineScoring()) as app:
        await wait_until_finished(app, run.run_id, timeout_s=30)
        done = await app.runs.get(TENANT, run.run_id)
        assert done.state is RunState.PARTIAL
        tasks = {t.model_id: t for t in done.progress.tasks}
        assert tasks["kept"].state is TaskState.SUCCEEDED
        assert tasks["gone"].state is TaskState.FAILED
        assert tasks["gone"].counters.failed_permanent == 3
        results = {r.model.model_id: r for r in (await app.runs.results(TENANT, run.run_id)).items}
        assert results["gone"].status is ResultStatus.FAILED
        assert [e.reason.value for e in results["gone"].errors] == ["model_not_found"]
        samples = (await app.runs.samples(TENANT, run.run_id, task_id=tasks["gone"].task_id)).items
        assert {s.last_error.reason.value for s in samples if s.last_error} == {"model_not_found"}
