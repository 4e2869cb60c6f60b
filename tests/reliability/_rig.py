"""A server process on a fake provider process, killed and restarted on the same store.

The fake provider runs as its own process so that its journal (who asked for what,
and when) outlives every evald process of a test.
"""

import json
import subprocess
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from evald_client import AsyncEvaldClient, ReconnectPolicy, Run
from evald_server.fake_provider import FakeProcess
from tests._shared import classification_records
from tests.harness import ServerProcess
from tests.reliability._support import (
    check_run_in_store,
    children_of,
    db_path,
    fake_model,
    kill,
    orphans_after,
    release,
    server_config,
    start_server,
    succeeded_keys,
)

NO_RECONNECT = ReconnectPolicy(max_attempts=0)
# How long before a kill an answer may arrive and still not be durable (group commit
# delay 20 ms; generous for a loaded 2-core machine).
UNCOMMITTED_S = 1.0


@dataclass
class Crash:
    """What the store and the fake held at the moment evald died."""

    finished: set[str]  # subtasks stored as succeeded (their provider request keys)
    journal_boundary: int  # the fake's request count: later requests came after the kill
    children: list[int]  # the dead server's scoring workers
    time: float  # Unix time of the kill (or of the SIGTERM)


@dataclass
class Rig:
    tmp_path: Path
    fake: FakeProcess
    config: Path
    env: Mapping[str, str] = field(default_factory=dict)
    servers: list[ServerProcess] = field(default_factory=list)

    @property
    def db(self) -> Path:
        return db_path(self.tmp_path)

    @property
    def server(self) -> ServerProcess:
        return self.servers[-1]

    async def start(self) -> str:
        server = ServerProcess(self.config, env=self.env)
        self.servers.append(server)
        return await start_server(server)

    def client(self, address: str | None = None) -> AsyncEvaldClient:
        return AsyncEvaldClient(address or self.server.address, reconnect=NO_RECONNECT)

    async def upload_and_run(self, address: str, records: int) -> str:
        """Upload ``records`` classification records as reviews 1.0.0 and start a run of
        the fake model on them; the run's id."""
        async with self.client(address) as client:
            await client.upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=classification_records(records),
            )
            run = await client.create_run(models=["fake"], datasets=[("reviews", "1.0.0")])
        return run.run_id

    async def kill(self) -> Crash:
        """SIGKILL the current server (no drain, no flush), then look at what is left."""
        children = children_of(self.server)
        killed_at = time.time()
        kill(self.server)
        boundary = (await self.fake.control.stats())["requests"]
        return Crash(succeeded_keys(self.db), boundary, children, killed_at)

    async def terminate(self) -> tuple[int, Crash]:
        """SIGTERM the current server and wait for its drain; (exit code, what is left)."""
        signalled_at = time.time()
        code = await anyio.to_thread.run_sync(self.server.terminate)
        release(self.server)
        boundary = (await self.fake.control.stats())["requests"]
        return code, Crash(succeeded_keys(self.db), boundary, [], signalled_at)

    async def finish(self, run_id: str, *, timeout_s: float = 90.0) -> Run:
        async with self.client() as client:
            return await client.wait(run_id, timeout_s=timeout_s)

    async def assert_no_finished_work_repeated(self, *crashes: Crash) -> None:
        await assert_no_finished_work_repeated(self.fake, *crashes)

    async def assert_orphans_exit(self, crash: Crash) -> None:
        left = await orphans_after(crash.children)
        assert left == [], f"the killed server's workers {left} outlived it"

    def assert_complete(self, run_id: str, subtasks: int) -> None:
        check = check_run_in_store(self.db, run_id, expected_subtasks=subtasks)
        assert check.run_state == "succeeded", check
        assert check.states == {"succeeded": subtasks}, check


async def assert_no_finished_work_repeated(fake: FakeProcess, *crashes: Crash) -> None:
    """No request after a kill for a subtask the store had as succeeded at that kill,
    and an answer was paid for again only if it was not durable at a kill.

    Every successful answer to a key but its last (the stored one) must have been
    given within ``UNCOMMITTED_S`` of a kill: held by the group commit (~20 ms) when
    it came, or sent by the fake to a server already dead. Anything older was
    durable and must never be asked again.
    """
    journal = await fake.control.journal()
    for crash in crashes:
        after = [e for e in journal if e.seq > crash.journal_boundary]
        repeated = sorted({e.key for e in after if e.key in crash.finished})
        assert repeated == [], f"finished subtasks requested again: {repeated[:10]}"
    answers: dict[str, list[float]] = {}
    for entry in journal:
        if entry.outcome == "ok" and entry.key and entry.finished_at is not None:
            answers.setdefault(entry.key, []).append(entry.finished_at)
    stale = {
        key: times[:-1]
        for key, times in answers.items()
        if any(not any(abs(t - c.time) <= UNCOMMITTED_S for c in crashes) for t in times[:-1])
    }
    assert stale == {}, f"answers paid for twice though durable before a kill: {stale}"


@asynccontextmanager
async def rig(
    tmp_path: Path,
    *,
    latency_ms: float = 20.0,
    max_concurrency: int = 8,
    fake_config: Mapping[str, Any] | None = None,
    model: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    fake_args: tuple[str, ...] = (),
    grace_s: float = 2.0,
) -> AsyncIterator[Rig]:
    args = ["--port", "0", "--latency-ms", str(latency_ms), *fake_args]
    if fake_config:
        args += ["--config-json", json.dumps(fake_config)]
    async with FakeProcess(*args, stderr=subprocess.DEVNULL) as fake:
        entry = fake_model(fake.base_url, max_concurrency=max_concurrency, **(model or {}))
        config = server_config(tmp_path, [entry], limits=limits, grace_s=grace_s)
        the_rig = Rig(tmp_path, fake, config, dict(env or {}))
        try:
            yield the_rig
        finally:
            with anyio.CancelScope(shield=True):
                for server in the_rig.servers:
                    pids = children_of(server) if server.process is not None else []
                    kill(server)
                    await orphans_after(pids, timeout_s=5.0)
