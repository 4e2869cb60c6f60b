"""A terminal run means its data is complete: the moment a watcher receives the run's
terminal event (or a task_scored event), ListSamples shows every succeeded sample of
the finished tasks with its scores and ListResults has their results. Checked over
many runs on a fresh server (the scoring pool's workers start during the first ones),
through the real gRPC server, the SDK, the scoring pool and a SQLite file."""

from contextlib import aclosing
from pathlib import Path

import anyio
import pytest

from evald_client import AsyncEvaldClient, StateChanged, SubtaskState, TaskScored
from tests._shared import classification_records, simulated_model
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio


async def _unscored(client: AsyncEvaldClient, run_id: str, task_id: str | None) -> list[str]:
    """Succeeded samples (of one task, or of the run) that have no scores yet."""
    return [
        s.subtask_id
        async for s in client.samples(
            run_id, task_id=task_id, state=SubtaskState.SUCCEEDED, page_size=500
        )
        if not s.scores
    ]


async def test_samples_are_scored_the_moment_the_run_or_task_is_reported_done(
    tmp_path: Path,
) -> None:
    config = make_config(
        tmp_path,
        models=[
            simulated_model("sim-a", latency_ms=0.5, max_concurrency=8),
            simulated_model("sim-b", latency_ms=0.5, max_concurrency=8),
        ],
    )
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        for name, size in (("d1", 150), ("d2", 60)):
            await client.upload_dataset(
                name=name,
                version="1.0.0",
                task_type="classification",
                records=classification_records(size, prefix="c"),
            )
        problems: list[str] = []
        with anyio.fail_after(100):
            for attempt in range(12):
                run = await client.create_run(
                    models=["sim-a", "sim-b"], datasets=[("d1", "1.0.0"), ("d2", "1.0.0")]
                )
                async with aclosing(client.watch(run.run_id)) as events:
                    async for event in events:
                        if isinstance(event, TaskScored):
                            task_id = event.result.task_id
                            missing = await _unscored(client, run.run_id, task_id)
                            if missing:
                                problems.append(f"run {attempt} task {task_id}: {len(missing)}")
                        elif isinstance(event, StateChanged) and event.is_terminal:
                            missing = await _unscored(client, run.run_id, None)
                            results = await client.results(run.run_id)
                            if missing or len(results) != 4:
                                problems.append(
                                    f"run {attempt} terminal: {len(missing)} unscored, "
                                    f"{len(results)} results"
                                )
        assert not problems, problems
