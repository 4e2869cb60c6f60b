"""Real runs whose comparison verdicts are known: a server subprocess with simulated
models of known accuracy, one classification and one QA dataset, four finished runs.

* ``baseline``: ``sim-90a`` (accuracy 0.90) on both datasets;
* ``weaker``: ``sim-60`` (0.60) — a drop of ~0.30 on 300 records: significant;
* ``peer``: ``sim-90b`` (0.90, another seed) — the same accuracy: no significant change;
* ``partial``: ``sim-90a`` on the classification dataset only, plus a dataset the
  baseline never ran (an unmatched task each way);
* ``flaky``: ``sim-flaky`` (0.8, a transient fault on 30 % of calls) without retries on
  the classification dataset: some samples fail permanently.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evald_client import EvaldClient, RetryPolicy
from tests.harness import ServerProcess, config_data, write_config

RECORDS = 300
LABELS = ("red", "green", "blue")


@dataclass(frozen=True, slots=True)
class KnownRuns:
    address: str
    baseline: str
    weaker: str
    peer: str
    partial: str
    flaky: str


def _model(model_id: str, accuracy: float, seed: int, faults: float = 0.0) -> dict[str, object]:
    simulator = {"accuracy": accuracy, "latency_ms_median": 1.0, "seed": seed}
    return {
        "id": model_id,
        "provider": "simulated",
        "max_concurrency": 32,
        "simulator": {**simulator, "fault_rate": faults},
    }


def known_runs(tmp_path: Path) -> Iterator[KnownRuns]:
    models = [
        _model("sim-90a", 0.9, 1),
        _model("sim-90b", 0.9, 7),
        _model("sim-60", 0.6, 3),
        _model("sim-flaky", 0.8, 5, faults=0.3),
    ]
    server = ServerProcess(write_config(tmp_path, config_data(tmp_path, models=models)))
    address = server.start()
    try:
        with EvaldClient(address, timeout_s=60) as client:
            client.upload_dataset(
                name="colours",
                version="1.0.0",
                task_type="classification",
                records=[
                    {"id": f"c{i}", "input": f"item {i}", "label": LABELS[i % 3], "choices": LABELS}
                    for i in range(RECORDS)
                ],
            )
            client.upload_dataset(
                name="capitals",
                version="1.0.0",
                task_type="qa",
                records=[
                    {"id": f"q{i}", "question": f"capital {i}?", "answers": [f"city {i}"]}
                    for i in range(RECORDS)
                ],
            )
            client.upload_dataset(
                name="extra",
                version="1.0.0",
                task_type="generation",
                records=[{"input": f"{i}+1", "reference": str(i + 1)} for i in range(20)],
            )
            both = [("colours", "1.0.0"), ("capitals", "1.0.0")]
            runs = {
                "baseline": client.create_run(models=["sim-90a"], datasets=both, name="base"),
                "weaker": client.create_run(models=["sim-60"], datasets=both, name="weak"),
                "peer": client.create_run(models=["sim-90b"], datasets=both, name="peer"),
                "partial": client.create_run(
                    models=["sim-90a"], datasets=[("colours", "1.0.0"), ("extra", "1.0.0")]
                ),
                "flaky": client.create_run(
                    models=["sim-flaky"],
                    datasets=[("colours", "1.0.0")],
                    retry_policy=RetryPolicy(max_retries=0),
                ),
            }
            for run in runs.values():
                client.wait(run.run_id, timeout_s=90)
        yield KnownRuns(address, **{name: run.run_id for name, run in runs.items()})
    finally:
        server.terminate()
