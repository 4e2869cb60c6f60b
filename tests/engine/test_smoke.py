"""A whole run on the simulated provider: dispatch, scoring, results, samples, events."""

from pathlib import Path

import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.domain import EventKind, ResultStatus, RunState, SubtaskState
from tests._shared import simulated_model
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished


@pytest.mark.anyio
async def test_a_run_executes_scores_and_reports(tmp_path: Path) -> None:
    config = make_config(
        tmp_path, [simulated_model("sim-a"), simulated_model("sim-b")], engine={"heartbeat_s": 0.5}
    )
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d1", 20)
        await upload(app, "d2", 7)
        spec = RunSpec(
            models=("sim-a", "sim-b"),
            datasets=(DatasetRef("d1", "1.0.0"), DatasetRef("d2", "1.0.0")),
            repeat=2,
        )
        run = await app.runs.create(TENANT, spec)
        assert run.progress.counters.total == (20 + 7) * 2 * 2
        events = await wait_until_finished(app, run.run_id)
        done = await app.runs.get(TENANT, run.run_id)
        assert done.state is RunState.SUCCEEDED
        assert done.progress.counters.succeeded == done.progress.counters.total
        results = await app.runs.results(TENANT, run.run_id)
        assert len(results.items) == 4
        assert all(r.status is ResultStatus.SUCCESS for r in results.items)
        assert all(r.report is not None and "accuracy" in r.report.metrics for r in results.items)
        assert results.items[0].profile.requests == 40
        kinds = [e.kind for e in events]
        assert kinds.count(EventKind.TASK_SCORED) == 4
        assert kinds[-1] is EventKind.RUN_STATE
        seqs = [e.seq for e in events if e.kind is not EventKind.HEARTBEAT]
        assert seqs == list(range(1, len(seqs) + 1))
        samples = await app.runs.samples(TENANT, run.run_id, page_size=10)
        assert len(samples.items) == 10
        assert samples.next_page_token
        assert all(s.state is SubtaskState.SUCCEEDED and s.scores for s in samples.items)
