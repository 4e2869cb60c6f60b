"""A task's samples read from the store page by page and scored in a worker process
give the report the in-process scorer gives on the decoded records."""

from pathlib import Path

import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.domain import TaskType
from evald_server.engine._task_scoring import StoredSamples
from evald_server.scoring import PageDecoder, ScoringPool, ScoringSample, score_task
from tests._shared import simulated_model
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished


@pytest.mark.anyio
async def test_stored_samples_page_a_task_and_score_like_its_records(tmp_path: Path) -> None:
    config = make_config(tmp_path, [simulated_model("sim")])
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 7)
        spec = RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),), repeat=3)
        run = await app.runs.create(TENANT, spec)
        await wait_until_finished(app, run.run_id)
        store = app.engine.store
        (task,) = await store.get_tasks(run.run_id)
        # Pages of 4 cut the repeats of a record across pages.
        pages = [page async for page in StoredSamples(store, task.task_id, page_size=4)]
        assert [len(p.samples) for p in pages] == [4, 4, 4, 4, 4, 1]
        decoder = PageDecoder()
        samples = [s for page in pages for s in decoder.decode(page)]
        within_a_page = pages[0].samples
        assert within_a_page[0].record_json is within_a_page[2].record_json  # one text
        rows = await store.run_subtasks(run.run_id, task.task_id, (), 0, 100)
        records = {
            r.record_id: r.fields for r in await store.read_records(task.dataset_id, range(7))
        }
        assert samples == [  # as the watcher built them when it decoded the records itself
            ScoringSample(
                str(r.row_id), r.record_id, r.repeat_index, records[r.record_id], r.output
            )
            for r in rows
        ]
        pool = ScoringPool(1)
        try:
            report = await pool.score(
                TaskType.CLASSIFICATION, StoredSamples(store, task.task_id), seed=5, timeout_s=60
            )
        finally:
            pool.close()
        assert report == score_task(TaskType.CLASSIFICATION, samples, seed=5)
        assert [s.subtask_id for s in report.sample_scores] == [str(r.row_id) for r in rows]
