"""The whole path through the real server and the real SDK: upload → run → watch →
results → samples, on simulated models."""

import json
from pathlib import Path

import pytest

from evald_client import (
    AsyncEvaldClient,
    Heartbeat,
    Progress,
    ResultStatus,
    RunState,
    TaskScored,
)
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

QA_RECORDS = [
    {
        "id": f"q{i}",
        "question": f"What is item {i}?",
        "context": f"Item {i} is a lamp.",
        "answers": ["a lamp"],
    }
    for i in range(12)
]


async def test_upload_run_watch_results_samples(tmp_path: Path) -> None:
    async with (
        running_server(make_config(tmp_path)) as address,
        AsyncEvaldClient(address) as client,
    ):
        dataset = await client.upload_dataset(
            name="lamps", version="1.0.0", task_type="qa", records=QA_RECORDS
        )
        assert dataset.record_count == 12

        run = await client.create_run(
            models=["sim-good", "sim-weak"], datasets=[("lamps", "1.0.0")], name="lifecycle"
        )
        events = [event async for event in client.watch(run.run_id)]
        # A heartbeat repeats the current seq (the contract's): on a loaded machine the
        # run lasts long enough for one, so only logged events must be strictly in order.
        seqs = [event.seq for event in events if not isinstance(event, Heartbeat)]
        assert seqs == sorted(set(seqs)), "no duplicate, in order"
        scored = [e for e in events if isinstance(e, TaskScored)]
        assert len(scored) == 2
        assert any(isinstance(e, Progress) for e in events)

        final = await client.get_run(run.run_id)
        assert final.state is RunState.SUCCEEDED
        assert final.progress.counts.succeeded == 24

        results = await client.results(run.run_id)
        by_model = {r.model.model_id: r for r in results}
        assert set(by_model) == {"sim-good", "sim-weak"}
        for result in results:
            assert result.status is ResultStatus.SUCCESS
            assert 0.0 <= result.metrics["exact_match"] <= 1.0
            task_samples = [s async for s in client.samples(run.run_id, task_id=result.task_id)]
            assert len(task_samples) == 12
            mean = sum(s.scores["exact_match"] for s in task_samples) / len(task_samples)
            assert result.metrics["exact_match"] == pytest.approx(mean)
        samples = [s async for s in client.samples(run.run_id, page_size=5)]
        assert len(samples) == 24
        assert len({s.subtask_id for s in samples}) == 24
        assert json.dumps([s.expected for s in samples])
