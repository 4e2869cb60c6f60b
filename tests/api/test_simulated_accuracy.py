"""The simulated provider's configured accuracy is what the scorers report: its wrong
answers ("not neg" for a label without choices, another choice, another letter) are
scored wrong, through the real server, on every task type whose simulator answers are
either right or wrong by construction."""

import math
from pathlib import Path
from typing import Any

import pytest

from evald_client import AsyncEvaldClient, RunState
from tests._shared import simulated_model
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

ACCURACY = 0.7
N = 300
# Four standard errors of a proportion over N draws: the configured accuracy is within
# this of the drawn one but for a 6e-5 chance, and the draws are fixed by the seed.
SAMPLING_ERROR = 4 * math.sqrt(ACCURACY * (1 - ACCURACY) / N)

DATASETS: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "labels": (
        "classification",
        [{"input": f"review {i}", "label": ("pos", "neg")[i % 2]} for i in range(N)],
    ),
    "choices": (
        "classification",
        [
            {"input": f"review {i}", "label": ("pos", "neg")[i % 2], "choices": ["pos", "neg"]}
            for i in range(N)
        ],
    ),
    "letters": (
        "multiple_choice",
        [
            {"question": f"q {i}", "choices": ["-2", "\u22124", "2", "10"], "answer_index": i % 4}
            for i in range(N)
        ],
    ),
}


async def test_the_scorer_reports_the_simulators_accuracy(tmp_path: Path) -> None:
    models = [simulated_model("sim-70", latency_ms=0.0, accuracy=ACCURACY, seed=7)]
    async with (
        running_server(make_config(tmp_path, models=models)) as address,
        AsyncEvaldClient(address) as client,
    ):
        for name, (task_type, records) in DATASETS.items():
            await client.upload_dataset(
                name=name, version="1.0.0", task_type=task_type, records=records
            )
        run = await client.create_run(
            models=["sim-70"], datasets=[(name, "1.0.0") for name in DATASETS]
        )
        assert (await client.wait(run.run_id, timeout_s=120)).state is RunState.SUCCEEDED
        for result in await client.results(run.run_id):
            samples = [s async for s in client.samples(run.run_id, task_id=result.task_id)]
            assert len(samples) == N
            # The simulator answered the gold text (the label, the gold letter) or not:
            right = [s.output in (s.expected, s.expected.split(".")[0]) for s in samples]
            assert [s.scores["correct"] == 1.0 for s in samples] == right, result.benchmark.name
            drawn = sum(right) / N
            assert result.metrics["accuracy"] == pytest.approx(drawn)
            assert abs(drawn - ACCURACY) <= SAMPLING_ERROR, (result.benchmark.name, drawn)
