"""kill -9 mid-run, restart on the same SQLite file: finished work is never requested again.

The fake provider runs in its own process so that its journal survives the engine's
death; the engine runs in a child process that is killed with SIGKILL.
"""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import anyio.abc
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from evald_server.domain import RunState
from evald_server.fake_provider import FakeProcess
from evald_server.store import SqliteStore, subtask_public_id
from tests._shared import wait_for

REPO = Path(__file__).resolve().parents[2]
RECORDS = 400


async def _line(stream: BufferedByteReceiveStream, prefix: str) -> str:
    with anyio.fail_after(60):
        while True:
            line = (await stream.receive_until(b"\n", 65536)).decode().strip()
            if line.startswith(prefix):
                return line[len(prefix) :].strip()


def _succeeded(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT task_id, record_idx, repeat_index FROM subtasks WHERE state = 'succeeded'"
        ).fetchall()
    finally:
        conn.close()
    return {subtask_public_id(*row) for row in rows}


async def _start(config: Path) -> tuple[anyio.abc.Process, BufferedByteReceiveStream]:
    process = await anyio.open_process(
        [sys.executable, "-m", "tests.engine._engine_process", str(config), str(RECORDS)],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    assert process.stdout is not None
    return process, BufferedByteReceiveStream(process.stdout)


@pytest.mark.anyio
async def test_kill_9_then_restart_repeats_no_finished_work(tmp_path: Path) -> None:
    async with FakeProcess("--port", "0", "--latency-ms", "50") as fake:
        db = tmp_path / "evald.sqlite3"
        config = tmp_path / "config.json"
        config.write_text(
            json.dumps(
                {
                    "store": {"url": f"sqlite:///{db}"},
                    "models": [
                        {
                            "id": "m1",
                            "provider": "openai",
                            "base_url": fake.base_url,
                            "max_concurrency": 8,
                        }
                    ],
                }
            )
        )
        first, out = await _start(config)
        try:
            run_id = await _line(out, "RUN ")

            async def answered() -> bool:
                # The fake is another process: polling its control API is the way to ask.
                return int((await fake.control.stats())["outcomes"].get("ok", 0)) >= 120

            await wait_for(answered, timeout_s=60)
        finally:
            first.kill()  # SIGKILL: no drain, no flush, no goodbye
            await first.wait()
            await first.aclose()
        boundary = (await fake.control.stats())["requests"]
        finished_before = _succeeded(db)
        assert 0 < len(finished_before) < RECORDS

        second, out = await _start(config)
        try:
            assert await _line(out, "RUN ") == run_id  # the same run, found by its request_id
            assert await _line(out, "DONE ") == RunState.SUCCEEDED.value
            assert await second.wait() == 0
        finally:
            await second.aclose()

        after = await fake.control.journal(since=boundary)
        repeated = sorted(e.key for e in after if e.key in finished_before)
        assert repeated == []
        # Only calls that were in flight at the kill (answered, but not yet committed)
        # may have been paid twice.
        duplicates = await fake.control.duplicates_after_success()
        assert set(duplicates).isdisjoint(finished_before)
        assert sum(duplicates.values()) <= 8 + 256

    store = await SqliteStore.open(db)
    try:
        run = await store.get_run(run_id)
        assert run is not None
        assert run.state is RunState.SUCCEEDED
        (task,) = await store.get_tasks(run_id)
        recount = await store.recount_task(task.task_id)
        assert task.counters == recount
        assert run.counters == recount
        assert recount.succeeded == RECORDS
    finally:
        await store.close()
