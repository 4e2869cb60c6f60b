"""A scoring worker imports what scoring needs, not the server's network stack.

Each worker is a spawned process that imports the scoring pool and the scorers; every
module it drags in is resident memory in every worker (aiohttp alone is ~18 MB;
pydantic with the record schemas ~17 MB, importlib.metadata ~2.6 MB).
"""

import json
import subprocess
import sys

# What a worker process loads: the pool's entry point and every registered scorer,
# then one small classification task scored.
_WORKER_IMPORTS = """
import json, sys
from evald_server.domain import TaskType
from evald_server.scoring._pool import _worker_main
from evald_server.scoring._registry import scorer_for
from evald_server.scoring._types import ScoringSample
for task_type in TaskType:
    scorer_for(task_type)
samples = [
    ScoringSample(f"s{i}", f"r{i}", 0, {"input": "x", "label": "pos"}, "pos") for i in range(20)
]
scorer_for(TaskType.CLASSIFICATION).score(samples, seed=0, worst_k=2, resamples=10)
print(json.dumps(sorted(sys.modules)))
"""


def _modules_of_a_worker() -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _WORKER_IMPORTS], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def test_a_scoring_worker_does_not_import_the_network_stack() -> None:
    modules = _modules_of_a_worker()
    heavy = {"aiohttp", "grpc", "google.protobuf", "rouge_score", "nltk"}
    loaded = {name for name in heavy if name in modules}
    assert not loaded, f"a scoring worker imports {sorted(loaded)}"


def test_a_scoring_worker_does_not_import_the_record_schemas() -> None:
    # Scorers read gold text and choices, they never validate a record: the schemas
    # (pydantic) and the JSONL parser load only when an upload is parsed.
    modules = _modules_of_a_worker()
    unwanted = {
        "pydantic",
        "pydantic_core",
        "evald_server.datasets._records",
        "evald_server.datasets._parser",
        "evald_server.config",
        "importlib.metadata",
    }
    loaded = unwanted & modules
    assert not loaded, f"a scoring worker imports {sorted(loaded)}"
