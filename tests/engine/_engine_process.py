"""An evald engine in its own process, for the kill -9 test.

    python -m tests.engine._engine_process CONFIG.json RECORDS

Uploads a classification dataset of RECORDS records and creates one run (both
idempotent, so a restart finds them again), prints ``RUN <run_id>``, and exits after
printing ``DONE <state>`` once the run has finished.
"""

import json
import sys
from pathlib import Path

import anyio

from evald_server.app import DatasetHeader, DatasetRef, Evald, RunSpec
from evald_server.config import parse_config
from evald_server.domain import TaskType
from tests._shared import classification_jsonl
from tests.engine._support import TENANT, InlineScoring


async def main(config_text: str, records: int) -> None:
    config = parse_config(json.loads(config_text))
    async with Evald.open(config, scoring=InlineScoring()) as app:
        header = DatasetHeader("crash", "1.0.0", TaskType.CLASSIFICATION, request_id="crash-upload")
        await app.datasets.upload(TENANT, header, [classification_jsonl(records)])
        spec = RunSpec(models=(config.models[0].id,), datasets=(DatasetRef("crash", "1.0.0"),))
        run = await app.runs.create(TENANT, spec, request_id="crash-run")
        print(f"RUN {run.run_id}", flush=True)
        async for _event in await app.runs.watch(TENANT, run.run_id):
            pass
        final = await app.runs.get(TENANT, run.run_id)
        print(f"DONE {final.state.value}", flush=True)


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]).read_text(), int(sys.argv[2]))
