"""Several evald server processes on one PostgreSQL database and one fake provider
process: the replicas of a scale-out deployment, each killable on its own.

Each replica has its own config (its own ``store.replica_id``, short leases so a
killed one is taken for dead within seconds); the store is read back with asyncpg,
not through evald.
"""

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import asyncpg

from evald_client import AsyncEvaldClient, ReconnectPolicy, Run
from evald_server.fake_provider import FakeProcess
from tests._postgres import empty
from tests._shared import classification_records
from tests.harness import ServerProcess, config_data, write_config
from tests.reliability._support import (
    fake_model,
    kill,
    release,
    start_server,
)

LEASE_S = 2.0
HEARTBEAT_S = 0.3
NO_RECONNECT = ReconnectPolicy(max_attempts=0)
TERMINAL = ("succeeded", "failed_permanent", "cancelled")


@dataclass
class Cluster:
    tmp_path: Path
    fake: FakeProcess
    pg_url: str
    models: Sequence[Mapping[str, Any]]
    limits: Mapping[str, Any] = field(default_factory=dict)
    lease_s: float = LEASE_S
    servers: dict[str, ServerProcess] = field(default_factory=dict)

    def config(self, replica_id: str) -> Path:
        home = self.tmp_path / replica_id
        home.mkdir(exist_ok=True)
        data = config_data(home, models=[dict(m) for m in self.models], limits=self.limits)
        data["store"] = {
            "url": self.pg_url,
            "replica_id": replica_id,
            "lease_s": self.lease_s,
            "heartbeat_s": HEARTBEAT_S,
            "pool_size": 4,
        }
        return write_config(home, data)

    async def start(self, replica_id: str) -> str:
        server = ServerProcess(self.config(replica_id))
        self.servers[replica_id] = server
        return await start_server(server)

    def address(self, replica_id: str) -> str:
        return self.servers[replica_id].address

    def kill(self, replica_id: str) -> None:
        kill(self.servers[replica_id])

    async def terminate(self, replica_id: str) -> int:
        server = self.servers[replica_id]
        code = await anyio.to_thread.run_sync(server.terminate)
        release(server)
        return code

    def client(self, replica_id: str, **options: Any) -> AsyncEvaldClient:
        options.setdefault("reconnect", NO_RECONNECT)
        return AsyncEvaldClient(self.address(replica_id), **options)

    async def start_run(
        self, replica_id: str, records: int, models: Sequence[str], **spec: Any
    ) -> Run:
        """Upload ``records`` classification records through ``replica_id`` and start a
        run of ``models`` on them there."""
        async with self.client(replica_id) as client:
            await client.upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=classification_records(records),
            )
            return await client.create_run(
                models=list(models), datasets=[("reviews", "1.0.0")], **spec
            )

    async def query(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.pg_url, timeout=10)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    async def succeeded_keys(self, run_id: str) -> set[str]:
        rows = await self.query(
            "SELECT task_id, record_idx, repeat_index FROM subtasks "
            "WHERE run_id = $1 AND state = 'succeeded'",
            run_id,
        )
        return {f"{r[0]}.{r[1]}.{r[2]}" for r in rows}

    async def assert_complete(self, run_id: str, subtasks: int) -> None:
        """Every subtask stored once and terminal; counters equal a recount; each task
        scored exactly once."""
        rows = await self.query(
            "SELECT COUNT(*), COUNT(DISTINCT (task_id, record_idx, repeat_index)), "
            "COUNT(*) FILTER (WHERE state = ANY($2::text[])) FROM subtasks WHERE run_id = $1",
            run_id,
            list(TERMINAL),
        )
        assert tuple(rows[0]) == (subtasks, subtasks, subtasks)
        columns = ("pending", "running", "succeeded", "failed", "failed_permanent", "cancelled")
        recount = await self.query(
            "SELECT task_id, state, COUNT(*) FROM subtasks WHERE run_id = $1 "
            "GROUP BY task_id, state",
            run_id,
        )
        counted: dict[str, dict[str, int]] = {}
        for task_id, state, n in recount:
            counted.setdefault(task_id, dict.fromkeys(columns, 0))[state] = n
        tasks = await self.query(
            f"SELECT task_id, total, {', '.join(columns)} FROM tasks WHERE run_id = $1", run_id
        )
        for task in tasks:
            stored = {c: task[c] for c in columns}
            assert stored == counted[task["task_id"]], task["task_id"]
            assert task["total"] == sum(stored.values())
        run = (
            await self.query(
                f"SELECT total, {', '.join(columns)} FROM runs WHERE run_id = $1", run_id
            )
        )[0]
        for c in columns:
            assert run[c] == sum(counted[t][c] for t in counted), c
        scored = await self.query(
            "SELECT payload::json ->> 'task_id', COUNT(*) FROM events "
            "WHERE run_id = $1 AND kind = 'task_scored' GROUP BY 1",
            run_id,
        )
        assert sorted(n for _, n in scored) == [1] * len(tasks), "each task scored once"


@asynccontextmanager
async def cluster(
    tmp_path: Path,
    pg_url: str,
    *,
    models: Sequence[tuple[str, int]],
    fake_args: Sequence[str] = ("--latency-ms", "20"),
    limits: Mapping[str, Any] | None = None,
    lease_s: float = LEASE_S,
) -> AsyncIterator[Cluster]:
    """A fake provider process and an empty database; ``models``: (id, max_concurrency),
    each sent to the fake under its own model name (the fake's peaks are per name)."""
    await empty(pg_url)
    async with FakeProcess("--port", "0", *fake_args) as fake:
        the_models = [
            fake_model(fake.base_url, model_id, model=model_id, max_concurrency=limit)
            for model_id, limit in models
        ]
        the_cluster = Cluster(tmp_path, fake, pg_url, the_models, dict(limits or {}), lease_s)
        try:
            yield the_cluster
        finally:
            for server in the_cluster.servers.values():
                kill(server)
