"""The PostgreSQL store under replicas: claims, outcome commits, NOTIFY, engine shapes.

    python -m bench.bench_replicas [--rows 20000] [--engine-n 4000] [--repeats 1]

* store: the engine's pattern through the Store port (claim pages of 64, commit
  outcomes in groups of 256) on ``--rows`` subtasks, by 1 store and by 3 stores at once
  (3 replicas, in this one process: they share its CPU), beside SQLite with 1 — claimed
  rows/s, committed outcomes/s, and database statements per subtask (each one a round
  trip; counted by asyncpg's query logger).
* notify: one store appends events (one per transaction) for 3 s while another listens:
  notices delivered per second and the delivery latency (commit → the other's feed).
* utilisation: 3 replicas share one model's limit of 12 (fake latency 100 ms, 1,500
  subtasks): the fake's busy slots while work is ready, as a share of the limit.
* watch latency: bench_e2e's P4 across 3 replicas (the answer at the fake → a progress
  snapshot counting it at a watcher on a replica), p50 and p99 (target p99 ≤ 1.2 s).
* engine: the P1 shape (one model, C = 100, fake latency 50 ms) and the P2 shape (C = 64,
  latency 0) of bench_engine on ``--engine-n`` subtasks, through the whole engine with
  the real provider and a fake provider process: SQLite 1 replica, PostgreSQL 1 and 3
  replicas (Evald instances in this process sharing one database and the model's limit),
  each as a ratio to the bare aiohttp loop on the same fake; and statements per subtask.

Needs PostgreSQL on ``--dsn`` (default ``EVALD_BENCH_PG`` or the local one); creates and
drops its own database. On a 2-core machine the replicas share the CPU: read ratios and
statements, not absolute speed-ups. Writes ``bench/results/replicas.json``.
"""

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg

from bench.bench_e2e import _progress_latency, _quantile
from bench.bench_engine import _bare_run, _jsonl
from evald_server.app import DatasetHeader, DatasetRef, Evald, RunSpec
from evald_server.config import parse_config
from evald_server.domain import EventKind, OutcomeKind, TaskType
from evald_server.fake_provider import FakeProcess
from evald_server.store import (
    DatasetRow,
    NewEvent,
    NewRun,
    NewTask,
    RecordRow,
    SqliteStore,
    Store,
    SubtaskOutcome,
)
from evald_server.store.postgres import PostgresStore

RESULTS = Path(__file__).parent / "results" / "replicas.json"
DEFAULT_DSN = os.environ.get("EVALD_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PAGE, BATCH = 64, 256


def _with_db(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", "", ""))


async def _admin(dsn: str, sql: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _fresh_db(dsn: str) -> tuple[str, str]:
    name = f"evald_bench_{uuid.uuid4().hex[:8]}"
    await _admin(dsn, f'CREATE DATABASE "{name}"')
    return name, _with_db(dsn, name)


# -- store: claims and commits through the port ---------------------------------------------


async def _seed(store: Store, rows: int) -> str:
    dataset = DatasetRow(
        "ds", "t", "ds", "1.0.0", TaskType.CLASSIFICATION, "0" * 64, rows, None, 0.0
    )
    records = (RecordRow(i, f"r{i}", {"input": f"x{i}"}) for i in range(rows))
    await store.create_dataset(dataset, records)
    task = NewTask("run_t0", 0, "m", {"model_id": "m"}, "ds", rows)
    run = NewRun("run", "t", "bench", {}, 1, time.time())
    await store.create_run(run, [task])
    return run.run_id


async def _drive(store: Store, run_id: str) -> tuple[float, float, int]:
    """Claim and complete until the run is exhausted; (claim s, commit s, rows)."""
    claim_s = commit_s = 0.0
    done = 0
    pending: list[SubtaskOutcome] = []
    while True:
        t0 = time.perf_counter()
        claim = await store.claim_ready(run_id, "m", PAGE, time.time())
        claim_s += time.perf_counter() - t0
        pending += [
            SubtaskOutcome(
                c.row_id,
                c.run_id,
                c.task_id,
                c.model_id,
                c.record_idx,
                c.repeat_index,
                OutcomeKind.SUCCEEDED,
                output="pos",
                latency_s=0.05,
            )
            for c in claim.subtasks
        ]
        if len(pending) >= BATCH or (claim.exhausted and pending):
            t0 = time.perf_counter()
            report = await store.record_outcomes(pending, time.time())
            commit_s += time.perf_counter() - t0
            done += report.applied
            pending = []
        if claim.exhausted and not claim.subtasks:
            return claim_s, commit_s, done


async def _store_phase(kind: str, replicas: int, rows: int, dsn: str, tmp: Path) -> dict[str, Any]:
    name = None
    if kind == "sqlite":
        stores: list[Store] = [await SqliteStore.open(tmp / f"{uuid.uuid4().hex}.sqlite3")]
    else:
        name, url = await _fresh_db(dsn)
        stores = [
            await PostgresStore.open(url, replica_id=f"b{i}", count_statements=True, pool_size=4)
            for i in range(replicas)
        ]
    try:
        run_id = await _seed(stores[0], rows)
        for s in stores:
            if isinstance(s, PostgresStore):
                s.statements = 0
        start = time.perf_counter()
        parts = []

        async def one(store: Store) -> None:
            parts.append(await _drive(store, run_id))

        async with anyio.create_task_group() as tg:
            for store in stores:
                tg.start_soon(one, store)
        wall = time.perf_counter() - start
        total = sum(p[2] for p in parts)
        assert total == rows, (total, rows)
        statements = sum(s.statements for s in stores if isinstance(s, PostgresStore))
        return {
            "store": kind,
            "replicas": replicas,
            "rows": rows,
            "wall_s": round(wall, 3),
            "subtasks_per_s": round(rows / wall, 1),
            # Time inside each kind of call, summed over the replicas' callers.
            "claimed_rows_per_s_of_claim_time": round(rows / sum(p[0] for p in parts), 1),
            "committed_outcomes_per_s_of_commit_time": round(rows / sum(p[1] for p in parts), 1),
            "statements_per_subtask": None if kind == "sqlite" else round(statements / rows, 3),
        }
    finally:
        for store in stores:
            await store.close()
        if name is not None:
            await _admin(dsn, f'DROP DATABASE "{name}" WITH (FORCE)')


# -- notify -------------------------------------------------------------------------------------


async def _notify_phase(dsn: str, seconds: float) -> dict[str, Any]:
    name, url = await _fresh_db(dsn)
    a = await PostgresStore.open(url, replica_id="sender")
    b = await PostgresStore.open(url, replica_id="listener")
    try:
        run_id = await _seed(a, 1)
        sent: dict[int, float] = {}
        latencies: list[float] = []
        stop = time.monotonic() + seconds
        note = NewEvent(EventKind.PROGRESS, {"bench": True}, time.time())

        async def listen() -> None:
            async for change in b.changes():
                if change.kind.value == "events" and int(change.detail) in sent:
                    latencies.append(time.perf_counter() - sent[int(change.detail)])

        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            while time.monotonic() < stop:
                (row,) = await a.append_events(run_id, [note])
                sent[row.seq] = time.perf_counter()
            await anyio.sleep(0.5)
            tg.cancel_scope.cancel()
        latencies.sort()
        return {
            "appends": len(sent),
            "appends_per_s": round(len(sent) / seconds, 1),
            # Every notice reaches the listener; its feed coalesces a run's notices that
            # arrive between two wake-ups of its consumer into one change.
            "notices_received": b._feed.notices,
            "notices_per_s": round(b._feed.notices / seconds, 1),
            "changes_delivered": len(latencies),
            "delivery_p50_ms": round(1000 * latencies[len(latencies) // 2], 2),
            "delivery_p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 2),
        }
    finally:
        await a.close()
        await b.close()
        await _admin(dsn, f'DROP DATABASE "{name}" WITH (FORCE)')


# -- engine shapes --------------------------------------------------------------------------------


def _config(url: str, fake_url: str, concurrency: int, n: int, replica: int) -> Any:
    store: dict[str, Any] = {"url": url}
    if url.startswith("postgresql"):
        store.update(replica_id=f"e{replica}", pool_size=6)
    return parse_config(
        {
            "store": store,
            "limits": {
                "max_inflight": 256,
                "max_subtasks_per_run": n,
                "max_records_per_dataset": n,
            },
            "models": [
                {
                    "id": "bench",
                    "provider": "openai",
                    "base_url": fake_url,
                    "max_concurrency": concurrency,
                    "timeout_s": 60,
                }
            ],
        }
    )


async def _engine_once(
    url: str, replicas: int, fake: FakeProcess, n: int, c: int
) -> dict[str, Any]:
    async with _apps(url, replicas, fake.base_url, c, n) as apps:
        header = DatasetHeader(f"bench-{n}", "1.0.0", TaskType.CLASSIFICATION)
        await apps[0].datasets.upload("bench", header, [_jsonl(n)])
        counted = [a.engine.store for a in apps if isinstance(a.engine.store, PostgresStore)]
        for store in counted:
            store._count_statements = True
            store.statements = 0
        await fake.control.reset()
        spec = RunSpec(models=("bench",), datasets=(DatasetRef(f"bench-{n}", "1.0.0"),))
        start = time.time()
        run = await apps[0].runs.create("bench", spec)
        async for _ in await apps[0].runs.watch("bench", run.run_id):
            pass
        tasks = await apps[0].engine.store.get_tasks(run.run_id)
        wall = max(t.finished_at or time.time() for t in tasks) - start
        peak = (await fake.control.stats())["peak_concurrency_all"]
        return {
            "wall_s": round(wall, 3),
            "req_per_s": round(n / wall, 1),
            "fake_peak_concurrency": peak,
            "statements_per_subtask": round(sum(s.statements for s in counted) / n, 3)
            if counted
            else None,
        }


@asynccontextmanager
async def _apps(
    url: str, replicas: int, fake_url: str, c: int, n: int
) -> AsyncIterator[list[Evald]]:
    """``replicas`` Evald instances on one store URL (one, for SQLite)."""
    async with AsyncExitStack() as stack:
        yield [
            await stack.enter_async_context(Evald.open(_config(url, fake_url, c, n, i)))
            for i in range(replicas)
        ]


async def _engine_phase(
    dsn: str, tmp: Path, shape: str, n: int, c: int, latency_ms: float, repeats: int
) -> list[dict[str, Any]]:
    rows = []
    async with FakeProcess("--port", "0", "--max-journal-entries", "0") as fake:
        await fake.control.configure(latency_ms=latency_ms)
        bare = statistics.median(
            [
                (await _bare_run(fake.base_url + "/v1/chat/completions", n, c))["req_per_s"]
                for _ in range(repeats)
            ]
        )
        for kind, replicas in (("sqlite", 1), ("postgresql", 1), ("postgresql", 3)):
            runs = []
            for _ in range(repeats):
                if kind == "sqlite":
                    name, url = None, f"sqlite:///{tmp / uuid.uuid4().hex}.sqlite3"
                else:
                    name, url = await _fresh_db(dsn)
                try:
                    runs.append(await _engine_once(url, replicas, fake, n, c))
                finally:
                    if name is not None:
                        await _admin(dsn, f'DROP DATABASE "{name}" WITH (FORCE)')
            best = sorted(runs, key=lambda r: r["wall_s"])[len(runs) // 2]
            rows.append(
                {
                    "shape": shape,
                    "store": kind,
                    "replicas": replicas,
                    "n": n,
                    "concurrency": c,
                    "fake_latency_ms": latency_ms,
                    **best,
                    "bare_req_per_s": round(bare, 1),
                    "throughput_ratio_to_bare": round(best["req_per_s"] / bare, 3),
                }
            )
    return rows


async def _utilisation_phase(dsn: str, n: int, limit: int, latency_ms: float) -> dict[str, Any]:
    """3 replicas sharing one model's global limit, beside 1 SQLite process holding it
    all (the per-call gap between an answer and the next request, which no share
    causes): the fake's busy slots while work was ready, as a share of the limit."""
    with tempfile.TemporaryDirectory() as tmp:
        alone = await _utilisation(f"sqlite:///{tmp}/u.sqlite3", 1, n, limit, latency_ms)
    name, url = await _fresh_db(dsn)
    try:
        shared = await _utilisation(url, 3, n, limit, latency_ms)
    finally:
        await _admin(dsn, f'DROP DATABASE "{name}" WITH (FORCE)')
    return {**shared, "sqlite_1_process": alone}


async def _utilisation(
    url: str, replicas: int, n: int, limit: int, latency_ms: float
) -> dict[str, Any]:
    """The fake's busy slots over the window in which work was ready (2 s after the first
    call, to let the shares settle, until the last call started)."""
    async with FakeProcess("--port", "0", "--latency-ms", str(latency_ms)) as fake:
        async with _apps(url, replicas, fake.base_url, limit, n) as apps:
            header = DatasetHeader(f"bench-{n}", "1.0.0", TaskType.CLASSIFICATION)
            await apps[0].datasets.upload("bench", header, [_jsonl(n)])
            await anyio.sleep(2.5)  # every replica has balanced its share once
            spec = RunSpec(models=("bench",), datasets=(DatasetRef(f"bench-{n}", "1.0.0"),))
            run = await apps[0].runs.create("bench", spec)
            async for _ in await apps[0].runs.watch("bench", run.run_id):
                pass
        journal = await fake.control.journal()
        peak = (await fake.control.stats())["peak_concurrency_all"]
    calls = [(e.started_at, e.finished_at) for e in journal if e.finished_at is not None]
    start = min(c[0] for c in calls) + 2.0
    end = max(c[0] for c in calls)
    busy = sum(max(0.0, min(f, end) - max(s, start)) for s, f in calls)
    first = min(c[0] for c in calls)
    seconds = int(max(c[1] for c in calls) - first) + 1
    per_second = [  # mean calls in flight in each second from the first call
        round(sum(max(0.0, min(f, first + i + 1) - max(s, first + i)) for s, f in calls), 2)
        for i in range(seconds)
    ]
    return {
        "replicas": replicas,
        "n": n,
        "limit": limit,
        "fake_latency_ms": latency_ms,
        "window_s": round(end - start, 3),
        "utilisation": round(busy / (limit * (end - start)), 3),
        "in_flight_per_second": per_second,
        "loadavg_after": os.getloadavg(),
        "fake_peak_concurrency": peak,
    }


async def _watch_latency_phase(dsn: str, n: int = 1500) -> dict[str, Any]:
    """3 replicas share a run (model limit 12, fake 20 ms) watched on a replica: for the
    k-th answer the fake sent, the time until the watcher got a progress snapshot
    counting k succeeded (bench_e2e's P4, across replicas)."""
    name, url = await _fresh_db(dsn)
    try:
        async with FakeProcess("--port", "0", "--latency-ms", "20") as fake:
            async with _apps(url, 3, fake.base_url, 12, n) as apps:
                header = DatasetHeader(f"bench-{n}", "1.0.0", TaskType.CLASSIFICATION)
                await apps[0].datasets.upload("bench", header, [_jsonl(n)])
                await anyio.sleep(2.5)  # every replica has balanced its share once
                spec = RunSpec(models=("bench",), datasets=(DatasetRef(f"bench-{n}", "1.0.0"),))
                run = await apps[0].runs.create("bench", spec)
                progress: list[tuple[float, int]] = []
                async for event in await apps[2].runs.watch("bench", run.run_id):
                    if event.progress is not None:
                        progress.append((time.time(), event.progress.counters.succeeded))
            journal = await fake.control.journal()
    finally:
        await _admin(dsn, f'DROP DATABASE "{name}" WITH (FORCE)')
    answered = sorted(e.finished_at for e in journal if e.outcome == "ok" and e.finished_at)
    latencies = _progress_latency(answered, progress)
    return {
        "replicas": 3,
        "n": n,
        "watched_on": "the third replica (all three run the work)",
        "snapshots": len(progress),
        "p50_s": round(_quantile(latencies, 0.5), 3),
        "p99_s": round(_quantile(latencies, 0.99), 3),
        "loadavg_after": os.getloadavg(),
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    if args.only_utilisation:
        return {
            "utilisation": await _utilisation_phase(args.dsn, 1500, 12, 100.0),
            "watch_latency": await _watch_latency_phase(args.dsn),
        }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        store_rows = [
            await _store_phase("sqlite", 1, args.rows, args.dsn, tmp),
            await _store_phase("postgresql", 1, args.rows, args.dsn, tmp),
            await _store_phase("postgresql", 3, args.rows, args.dsn, tmp),
        ]
        notify = await _notify_phase(args.dsn, 3.0)
        engine = []
        if not args.skip_engine:
            engine += await _engine_phase(
                args.dsn, tmp, "P1", args.engine_n, 100, 50.0, args.repeats
            )
            engine += await _engine_phase(args.dsn, tmp, "P2", args.engine_n, 64, 0.0, args.repeats)
    return {
        "benchmark": "replicas",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg": os.getloadavg(),
        },
        "settings": vars(args) | {"dsn": urlsplit(args.dsn).hostname, "page": PAGE, "batch": BATCH},
        "store": store_rows,
        "notify": notify,
        "engine": engine,
        "utilisation": await _utilisation_phase(args.dsn, 1500, 12, 100.0),
        "watch_latency": await _watch_latency_phase(args.dsn),
    }


def _print(report: dict[str, Any]) -> None:
    u = report["utilisation"]
    print(
        f"utilisation of a global limit of {u['limit']} by 3 replicas: {u['utilisation']} "
        f"over {u['window_s']} s, fake peak {u['fake_peak_concurrency']}; 1 SQLite process "
        f"holding it all: {u['sqlite_1_process']['utilisation']}"
    )
    w = report["watch_latency"]
    print(f"progress latency across replicas: p50 {w['p50_s']} s, p99 {w['p99_s']} s")
    if "store" not in report:
        return
    for row in report["store"]:
        print(
            f"store {row['store']:<10} x{row['replicas']}: {row['subtasks_per_s']:>8} subtasks/s, "
            f"claims {row['claimed_rows_per_s_of_claim_time']:>8} rows/s, commits "
            f"{row['committed_outcomes_per_s_of_commit_time']:>8} outcomes/s, "
            f"statements/subtask {row['statements_per_subtask']}"
        )
    n = report["notify"]
    print(
        f"notify: {n['notices_per_s']} notices/s delivered, p50 {n['delivery_p50_ms']} ms, "
        f"p99 {n['delivery_p99_ms']} ms"
    )
    for row in report["engine"]:
        print(
            f"{row['shape']} {row['store']:<10} x{row['replicas']}: {row['req_per_s']:>8} req/s, "
            f"{row['throughput_ratio_to_bare']} x bare, statements/subtask "
            f"{row['statements_per_subtask']}, fake peak {row['fake_peak_concurrency']}"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_replicas")
    parser.add_argument("--dsn", default=DEFAULT_DSN)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--engine-n", type=int, default=4000)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument(
        "--only-utilisation",
        action="store_true",
        help="only the global-limit and watch-latency phases",
    )
    args = parser.parse_args(argv)
    report = asyncio.run(_main(args))
    _print(report)
    RESULTS.parent.mkdir(exist_ok=True)
    if args.only_utilisation and RESULTS.exists():  # keep the other phases' figures
        report = {**json.loads(RESULTS.read_text()), **report}
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
