"""PostgreSQL driver for the replicated store: asyncpg vs psycopg 3 (with its pool).

    python -m bench.bench_pg_driver [--rows 20000] [--claimers 4] [--page 64] [--batch 256]

The two statements that decide a store's cost per subtask, on the schema shape the
PostgreSQL store needs (owner + lease stamped at claim, owner-guarded outcomes,
counters in the same transaction):

* claim: ``UPDATE … WHERE row_id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT page)
  RETURNING …`` plus the counter update, one transaction, by ``--claimers`` concurrent
  connections (SKIP LOCKED lets them pass each other);
* outcome commit: one transaction per group of ``--batch`` outcomes — the owner guard
  (``SELECT … WHERE row_id = ANY(ids) AND owner = me FOR UPDATE``), one pipelined
  ``executemany`` of primary-key UPDATEs, and the counter update. (A single
  ``UPDATE … FROM unnest(arrays)`` was measured first: the planner, whose statistics
  still say that no row is running, joins by filter, 256 × 256 comparisons — 9–19 ms
  per batch of 256 at 20,000 rows, against ~2 ms for this form.)

Both drivers run the same SQL against the same server, interleaved, median of
``--repeats``. Per driver: transactions/s and rows/s for each phase, this process's
CPU per row (the driver's share of the server's event loop — what one evald replica
pays), and the PostgreSQL server's CPU per row (all its processes, via psutil).
Needs a PostgreSQL on ``--dsn`` (default ``postgresql://root@127.0.0.1:5432/postgres``,
or ``EVALD_BENCH_PG``); it creates and drops its own database. Prints a table and
writes ``bench/results/pg_driver.json``.
"""

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import psutil
import psycopg
from psycopg_pool import AsyncConnectionPool

RESULTS = Path(__file__).parent / "results" / "pg_driver.json"
DEFAULT_DSN = "postgresql://root@127.0.0.1:5432/postgres"

SCHEMA = (
    """CREATE TABLE subtasks (
        row_id BIGSERIAL PRIMARY KEY,
        run_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        model_id TEXT NOT NULL,
        state TEXT NOT NULL,
        owner TEXT,
        lease_until DOUBLE PRECISION,
        attempt INTEGER NOT NULL DEFAULT 0,
        output TEXT,
        latency_s DOUBLE PRECISION,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX subtasks_pending ON subtasks (run_id, model_id, row_id) WHERE state = 'pending'",
    """CREATE TABLE tasks (
        task_id TEXT PRIMARY KEY,
        pending INTEGER NOT NULL,
        running INTEGER NOT NULL DEFAULT 0,
        succeeded INTEGER NOT NULL DEFAULT 0
    )""",
)

# $n placeholders: asyncpg's native form; psycopg gets the same text with %(pn)s.
CLAIM = (
    "UPDATE subtasks SET state = 'running', owner = $1, lease_until = $2, updated_at = $3 "
    "WHERE row_id IN (SELECT row_id FROM subtasks WHERE run_id = $4 AND model_id = $5 "
    "AND state = 'pending' ORDER BY row_id LIMIT $6 FOR UPDATE SKIP LOCKED) "
    "RETURNING row_id, task_id"
)
CLAIM_COUNTERS = (
    "UPDATE tasks SET pending = pending - $1, running = running + $1 WHERE task_id = $2"
)
OWNED = (
    "SELECT row_id FROM subtasks WHERE row_id = ANY($1::bigint[]) AND state = 'running' "
    "AND owner = $2 FOR UPDATE"
)
COMPLETE = (
    "UPDATE subtasks SET state = 'succeeded', owner = NULL, updated_at = $1, output = $2, "
    "latency_s = $3, attempt = attempt + 1 WHERE row_id = $4"
)
COMPLETE_COUNTERS = (
    "UPDATE tasks SET running = running - $1, succeeded = succeeded + $1 WHERE task_id = $2"
)


def _psycopg_sql(sql: str) -> str:
    return re.sub(r"\$(\d)", r"%(p\1)s", sql)


def _params(*values: object) -> dict[str, object]:
    return {f"p{i}": v for i, v in enumerate(values, start=1)}


class Driver(Protocol):
    name: str

    async def claim(self, owner: str, page: int) -> list[int]: ...
    async def complete(self, owner: str, row_ids: Sequence[int]) -> int: ...
    async def close(self) -> None: ...


class AsyncpgDriver:
    name = "asyncpg"

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, dsn: str, size: int) -> "AsyncpgDriver":
        return cls(await asyncpg.create_pool(dsn, min_size=size, max_size=size))

    async def claim(self, owner: str, page: int) -> list[int]:
        now = time.time()
        async with self._pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(CLAIM, owner, now + 30.0, now, "run", "model", page)
            if rows:
                await conn.execute(CLAIM_COUNTERS, len(rows), "task")
        return [r[0] for r in rows]

    async def complete(self, owner: str, row_ids: Sequence[int]) -> int:
        outputs = ["B"] * len(row_ids)
        latencies = [0.05] * len(row_ids)
        now = time.time()
        async with self._pool.acquire() as conn, conn.transaction():
            owned = [r[0] for r in await conn.fetch(OWNED, list(row_ids), owner)]
            rows = zip(owned, outputs, latencies, strict=True)
            await conn.executemany(COMPLETE, [(now, o, lat, r) for r, o, lat in rows])
            await conn.execute(COMPLETE_COUNTERS, len(owned), "task")
        return len(owned)

    async def close(self) -> None:
        await self._pool.close()


class PsycopgDriver:
    name = "psycopg"

    def __init__(self, pool: AsyncConnectionPool) -> None:
        self._pool = pool
        self._claim = _psycopg_sql(CLAIM)
        self._claim_counters = _psycopg_sql(CLAIM_COUNTERS)
        self._owned = _psycopg_sql(OWNED)
        self._complete = _psycopg_sql(COMPLETE)
        self._complete_counters = _psycopg_sql(COMPLETE_COUNTERS)

    @classmethod
    async def open(cls, dsn: str, size: int) -> "PsycopgDriver":
        pool = AsyncConnectionPool(dsn, min_size=size, max_size=size, open=False)
        await pool.open(wait=True)
        return cls(pool)

    async def claim(self, owner: str, page: int) -> list[int]:
        now = time.time()
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(
                self._claim, _params(owner, now + 30.0, now, "run", "model", page), prepare=True
            )
            rows = await cur.fetchall()
            if rows:
                await conn.execute(self._claim_counters, _params(len(rows), "task"), prepare=True)
        return [r[0] for r in rows]

    async def complete(self, owner: str, row_ids: Sequence[int]) -> int:
        outputs = ["B"] * len(row_ids)
        latencies = [0.05] * len(row_ids)
        now = time.time()
        async with self._pool.connection() as conn, conn.transaction():
            cur = await conn.execute(self._owned, _params(list(row_ids), owner), prepare=True)
            owned = [r[0] for r in await cur.fetchall()]
            async with conn.cursor() as many:
                rows = zip(owned, outputs, latencies, strict=True)
                await many.executemany(
                    self._complete, [_params(now, o, lat, r) for r, o, lat in rows]
                )
            await conn.execute(self._complete_counters, _params(len(owned), "task"), prepare=True)
        return len(owned)

    async def close(self) -> None:
        await self._pool.close()


Opener = Callable[[str, int], Awaitable[Driver]]
DRIVERS: dict[str, Opener] = {"asyncpg": AsyncpgDriver.open, "psycopg": PsycopgDriver.open}


@dataclass
class Row:
    driver: str
    rows: int
    claim_tx_per_s: float
    claim_rows_per_s: float
    claim_client_cpu_us_per_row: float
    complete_tx_per_s: float
    complete_rows_per_s: float
    complete_client_cpu_us_per_row: float
    claim_server_cpu_us_per_row: float
    complete_server_cpu_us_per_row: float


def _with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{database}"))


def _postgres_cpu_s() -> float:
    total = 0.0
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] and proc.info["name"].startswith("postgres"):
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
    return total


async def _load(conn: asyncpg.Connection, rows: int) -> None:
    await conn.execute("DROP TABLE IF EXISTS subtasks, tasks")
    for statement in SCHEMA:
        await conn.execute(statement)
    now = time.time()
    await conn.copy_records_to_table(
        "subtasks",
        records=(("run", "task", "model", "pending", now) for _ in range(rows)),
        columns=("run_id", "task_id", "model_id", "state", "updated_at"),
    )
    await conn.execute("INSERT INTO tasks (task_id, pending) VALUES ('task', $1)", rows)
    await conn.execute("ANALYZE subtasks")


async def _measure(driver: Driver, rows: int, claimers: int, page: int, batch: int) -> Row:
    owner = f"bench-{os.getpid()}"
    claimed: list[int] = []
    claims = 0

    async def claimer() -> None:
        nonlocal claims
        while True:
            got = await driver.claim(owner, page)
            if not got:
                return
            claims += 1
            claimed.extend(got)

    cpu0, pg0, t0 = time.process_time(), _postgres_cpu_s(), time.perf_counter()
    await asyncio.gather(*(claimer() for _ in range(claimers)))
    cpu1, pg1, t1 = time.process_time(), _postgres_cpu_s(), time.perf_counter()
    assert len(claimed) == rows == len(set(claimed)), "every row claimed exactly once"

    batches = [claimed[i : i + batch] for i in range(0, len(claimed), batch)]
    applied = 0
    queue = iter(batches)

    async def committer() -> None:
        nonlocal applied
        for group in queue:
            done = await driver.complete(owner, group)
            applied += done

    # Two committers: a replica's group commit overlaps the next batch with the current.
    await asyncio.gather(committer(), committer())
    cpu2, pg2, t2 = time.process_time(), _postgres_cpu_s(), time.perf_counter()
    assert applied == rows, f"applied {applied} of {rows}"
    return Row(
        driver=driver.name,
        rows=rows,
        claim_tx_per_s=claims / (t1 - t0),
        claim_rows_per_s=rows / (t1 - t0),
        claim_client_cpu_us_per_row=(cpu1 - cpu0) / rows * 1e6,
        complete_tx_per_s=len(batches) / (t2 - t1),
        complete_rows_per_s=rows / (t2 - t1),
        complete_client_cpu_us_per_row=(cpu2 - cpu1) / rows * 1e6,
        claim_server_cpu_us_per_row=(pg1 - pg0) / rows * 1e6,
        complete_server_cpu_us_per_row=(pg2 - pg1) / rows * 1e6,
    )


def _median(rows: list[Row]) -> Row:
    fields = {k: statistics.median(getattr(r, k) for r in rows) for k in asdict(rows[0])}
    fields["driver"] = rows[0].driver
    fields["rows"] = rows[0].rows
    return Row(**fields)


async def _main(args: argparse.Namespace) -> list[Row]:
    database = f"evald_bench_driver_{os.getpid()}"
    admin = await asyncpg.connect(args.dsn)
    await admin.execute(f'CREATE DATABASE "{database}"')
    dsn = _with_database(args.dsn, database)
    runs: dict[str, list[Row]] = {name: [] for name in DRIVERS}
    try:
        loader = await asyncpg.connect(dsn)
        try:
            for _ in range(args.repeats):
                for name, open_driver in DRIVERS.items():  # interleaved: same conditions
                    await _load(loader, args.rows)
                    driver = await open_driver(dsn, args.claimers + 2)
                    try:
                        runs[name].append(
                            await _measure(driver, args.rows, args.claimers, args.page, args.batch)
                        )
                    finally:
                        await driver.close()
        finally:
            await loader.close()
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()
    return [_median(rows) for rows in runs.values()]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_pg_driver")
    parser.add_argument("--dsn", default=os.environ.get("EVALD_BENCH_PG", DEFAULT_DSN))
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--claimers", type=int, default=4)
    parser.add_argument("--page", type=int, default=64)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        rows = asyncio.run(_main(args))
    except (OSError, asyncpg.PostgresError) as exc:
        # A figure about PostgreSQL needs one; `python -m bench` goes on with the others.
        print(f"skipped: no usable PostgreSQL at {args.dsn}: {exc}")
        return
    print(
        f"{args.rows} rows, pages of {args.page} by {args.claimers} claimers, "
        f"commits of {args.batch}; CPU in µs per row (client = this process, pg = server)"
    )
    print(
        f"{'driver':<8} {'claim tx/s':>10} {'rows/s':>7} {'client':>6} {'pg':>5} "
        f"{'commit tx/s':>11} {'rows/s':>7} {'client':>6} {'pg':>5}"
    )
    for r in rows:
        print(
            f"{r.driver:<8} {r.claim_tx_per_s:>10.0f} {r.claim_rows_per_s:>7.0f} "
            f"{r.claim_client_cpu_us_per_row:>6.1f} {r.claim_server_cpu_us_per_row:>5.0f} "
            f"{r.complete_tx_per_s:>11.0f} {r.complete_rows_per_s:>7.0f} "
            f"{r.complete_client_cpu_us_per_row:>6.1f} {r.complete_server_cpu_us_per_row:>5.0f}"
        )
    result: dict[str, Any] = {
        "benchmark": "pg_driver",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg": os.getloadavg(),
        },
        "versions": {
            "asyncpg": version("asyncpg"),
            "psycopg": psycopg.__version__,
            "psycopg_pool": version("psycopg-pool"),
        },
        "settings": {k: v for k, v in vars(args).items() if k != "dsn"},
        "rows": [asdict(r) for r in rows],
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
