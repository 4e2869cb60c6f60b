"""Backups as docs/operations.md tells an operator to take them, command for command.

The shell blocks of the page's "Backups" section are read from the page and run as
they stand (``bash -euo pipefail``), with their variables (``STORE``, ``BACKUP``,
``DATABASE_URL``) set, against a server that is working on a run when the backup is
taken. A fresh server on the restored copy then lists the runs of the backup moment —
not one created after it — with the same results, and finishes the run that was in
flight, from where the backup left it.
"""

import json
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_client import AsyncEvaldClient, RunState
from evald_server.config import parse_config
from tests._postgres import empty, new_database, pg_url
from tests._shared import classification_records, wait_for
from tests.harness import ServerProcess, config_data, running_server, write_config
from tests.reliability._support import release, start_server

__all__ = ["pg_url"]

pytestmark = pytest.mark.anyio

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
FINISHED = 40  # records of the run finished before the backup
IN_FLIGHT = 400  # records of the run the server works on while the backup is taken
_FENCE = re.compile(r"^(\s*)```bash\s*$")


def documented_block(marker: str) -> str:
    """The ```bash block that follows ``<!-- marker -->`` on the page, dedented."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    start = lines.index(next(line for line in lines if line.strip() == f"<!-- {marker} -->"))
    fence = _FENCE.match(lines[start + 1])
    assert fence is not None, f"no ```bash block right after <!-- {marker} -->"
    indent = len(fence.group(1))
    end = next(i for i in range(start + 2, len(lines)) if lines[i].strip() == "```")
    return "\n".join(line[indent:] for line in lines[start + 2 : end]) + "\n"


def run_documented(marker: str, variables: Mapping[str, str]) -> None:
    """Run the page's block as an operator would, ``python3`` being this environment's."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", documented_block(marker)],
        env={**os.environ, "PATH": path, **variables},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"{marker}: exit {done.returncode}\n{done.stderr}"


def _models() -> list[dict[str, Any]]:
    """A quick model for the finished runs and a slow one that is still working when the
    backup is taken."""
    quick = {"accuracy": 0.9, "latency_ms_median": 1.0, "seed": 1}
    slow = {"accuracy": 0.7, "latency_ms_median": 20.0, "latency_sigma": 0.1, "seed": 2}
    return [
        {"id": "sim-quick", "provider": "simulated", "max_concurrency": 8, "simulator": quick},
        {"id": "sim-slow", "provider": "simulated", "max_concurrency": 2, "simulator": slow},
    ]


class Runs:
    """The runs a test makes: one finished and one in flight before the backup, one
    after it; their ids and the finished run's results (the contract's JSON, parsed)."""

    def __init__(self) -> None:
        self.finished = ""
        self.finished_results: object = None
        self.in_flight = ""
        self.after_backup = ""

    async def before_backup(self, address: str) -> None:
        async with AsyncEvaldClient(address) as client:
            for name, count in (("small", FINISHED), ("large", IN_FLIGHT)):
                await client.upload_dataset(
                    name=name,
                    version="1.0.0",
                    task_type="classification",
                    records=classification_records(count, prefix=name),
                )
            run = await client.create_run(models=["sim-quick"], datasets=[("small", "1.0.0")])
            done = await client.wait(run.run_id, timeout_s=60)
            assert done.state is RunState.SUCCEEDED
            self.finished = run.run_id
            self.finished_results = json.loads(await client.results_json(run.run_id))
            slow = await client.create_run(models=["sim-slow"], datasets=[("large", "1.0.0")])
            self.in_flight = slow.run_id

            async def some_answered() -> bool:
                counts = (await client.get_run(slow.run_id)).progress.counts
                return counts.succeeded >= 10

            await wait_for(some_answered, timeout_s=60)

    async def after(self, address: str) -> None:
        async with AsyncEvaldClient(address) as client:
            later = await client.create_run(models=["sim-quick"], datasets=[("small", "1.0.0")])
            self.after_backup = later.run_id
            assert (await client.wait(later.run_id, timeout_s=60)).state is RunState.SUCCEEDED

    async def check_restored(self, address: str) -> None:
        """The restored store holds the backup moment's runs, not the later one."""
        async with AsyncEvaldClient(address) as client:
            listed = {run.run_id async for run in client.list_runs()}
            assert listed == {self.finished, self.in_flight}
            # Parsed: the order of a map's entries in the JSON is not part of the result.
            assert json.loads(await client.results_json(self.finished)) == self.finished_results
            resumed = await client.wait(self.in_flight, timeout_s=120)
            assert resumed.state is RunState.SUCCEEDED
            assert resumed.progress.counts.succeeded == IN_FLIGHT
            (result,) = await client.results(self.in_flight)
            assert result.execution.samples_succeeded == IN_FLIGHT


async def test_a_sqlite_backup_of_a_running_server_restores_its_runs_and_results(
    tmp_path: Path,
) -> None:
    data = config_data(tmp_path, models=_models())
    store = tmp_path / "evald.sqlite3"
    assert data["store"]["url"] == f"sqlite:///{store}"
    backup = tmp_path / "backups" / "evald-backup.sqlite3"
    backup.parent.mkdir()
    variables = {"STORE": str(store), "BACKUP": str(backup)}
    config = write_config(tmp_path, data)
    runs = Runs()

    server = ServerProcess(config)
    address = await start_server(server)
    try:
        await runs.before_backup(address)
        await anyio.to_thread.run_sync(run_documented, "backup: sqlite", variables)
        await runs.after(address)
    finally:
        assert await anyio.to_thread.run_sync(server.terminate) == 0, server.stderr()
        release(server)

    await anyio.to_thread.run_sync(run_documented, "restore: sqlite", variables)
    restored = ServerProcess(config)
    address = await start_server(restored)
    try:
        await runs.check_restored(address)
    finally:
        assert await anyio.to_thread.run_sync(restored.terminate) == 0, restored.stderr()
        release(restored)


async def test_a_postgresql_backup_of_a_running_replica_restores_its_runs_and_results(
    tmp_path: Path, pg_url: str
) -> None:
    await empty(pg_url)
    backup = tmp_path / "evald.dump"
    replica = {"lease_s": 2.0, "heartbeat_s": 0.2}
    data = config_data(tmp_path, models=_models())
    data["store"] = {"url": pg_url, "replica_id": "before-backup", **replica}
    runs = Runs()
    async with running_server(parse_config(data)) as address:
        await runs.before_backup(address)
        variables = {"DATABASE_URL": pg_url, "BACKUP": str(backup)}
        await anyio.to_thread.run_sync(run_documented, "backup: postgresql", variables)
        await runs.after(address)

    async with new_database(pg_url, "restored") as restored_url:
        variables = {"DATABASE_URL": restored_url, "BACKUP": str(backup)}
        await anyio.to_thread.run_sync(run_documented, "restore: postgresql", variables)
        # Another replica id: "before-backup" is still within its lease in the dump.
        data["store"] = {"url": restored_url, "replica_id": "after-restore", **replica}
        async with running_server(parse_config(data)) as address:
            await runs.check_restored(address)
