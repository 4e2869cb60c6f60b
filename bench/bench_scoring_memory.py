"""The server's memory while it scores one large task from the store, replayed.

    python -m bench.bench_scoring_memory [--n 100000] [--repeats 2] [--before DIR]

P3's peak (bench_e2e, bench_engine) is the scoring phase of the whole-task path: the
server reads the task's outputs page by page, ships them to a scoring worker, takes
its reply (every per-sample score) and stores it with the task's profile. Measuring it
through a whole run costs a minute of inference first; here that inference is done
once (a child runs ``--n`` classification subtasks at fake latency 0 on a fresh SQLite
store), and the scoring phase is then replayed in fresh children: a copy of the store
with the task put back to ``scoring`` (its result, per-sample scores and the run's end
removed), opened by ``Evald`` (the composition root: the real store, scoring pool and
engine, no gRPC), which scores it at start as after a restart. Each child samples its
own RSS every 20 ms until the run ends: at open (base), at the peak, and the scoring
wall.

``--before DIR`` replays the same store with another checkout's ``service/`` on
``PYTHONPATH`` too (e.g. an export of main), interleaved with this one. Prints a table
and writes ``bench/results/scoring_memory.json``.
"""

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil

RESULTS = Path(__file__).parent / "results" / "scoring_memory.json"
TENANT = "bench"


def _config(db: Path, fake_url: str, n: int) -> Any:
    from evald_server.config import parse_config

    return parse_config(
        {
            "store": {"url": f"sqlite:///{db}"},
            "limits": {"max_subtasks_per_run": n, "max_records_per_dataset": n},
            "models": [
                {"id": "bench", "provider": "openai", "base_url": fake_url, "max_concurrency": 64}
            ],
        }
    )


async def _make_store(db: Path, n: int) -> None:
    """One finished run of n classification subtasks (fake latency 0)."""
    from evald_server.app import DatasetHeader, DatasetRef, Evald, RunSpec
    from evald_server.domain import TaskType
    from evald_server.fake_provider import FakeProcess

    lines = (
        json.dumps({"id": f"r{i}", "input": f"review {i}", "label": "pos" if i % 2 else "neg"})
        for i in range(n)
    )
    body = ("\n".join(lines) + "\n").encode()
    async with FakeProcess("--port", "0", stderr=subprocess.DEVNULL) as fake:
        await fake.control.configure(latency_ms=0)
        async with Evald.open(_config(db, fake.base_url, n)) as app:
            header = DatasetHeader("replay", "1.0.0", TaskType.CLASSIFICATION)
            await app.datasets.upload(TENANT, header, [body])
            spec = RunSpec(models=("bench",), datasets=(DatasetRef("replay", "1.0.0"),))
            run = await app.runs.create(TENANT, spec)
            async for _ in await app.runs.watch(TENANT, run.run_id):
                pass


def _reset(db: Path) -> None:
    """Put the run's tasks back to 'scoring', as a server stopped while scoring left them."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE tasks SET state = 'scoring', result_status = NULL")
        conn.execute("DELETE FROM results")
        conn.execute("UPDATE subtasks SET scores = NULL, correct = NULL")
        conn.execute("UPDATE runs SET state = 'running', finished_at = NULL, terminal_seq = NULL")
    conn.close()


async def _replay(db: Path, n: int) -> dict[str, float]:
    from evald_server.app import Evald

    me = psutil.Process()
    async with Evald.open(_config(db, "http://127.0.0.1:9", n)) as app:
        base = me.memory_info().rss / 2**20
        peak = base
        started = time.perf_counter()
        while True:
            peak = max(peak, me.memory_info().rss / 2**20)
            run = (await app.store.list_runs(TENANT, None, 1))[0]
            if run.state.value != "running":
                break
            await anyio.sleep(0.02)
        return {
            "base_rss_mb": round(base, 1),
            "peak_rss_mb": round(peak, 1),
            "scoring_s": round(time.perf_counter() - started, 2),
            "state": run.state.value,
        }


def _child(argv: list[str], service: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if service is not None:
        env["PYTHONPATH"] = service
    done = subprocess.run(
        [sys.executable, "-m", "bench.bench_scoring_memory", *argv],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    if done.returncode != 0:
        sys.exit(done.stderr)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_scoring_memory")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--before", type=Path, help="another checkout's service/ directory")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=2, metavar=("MODE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, db = args.child
        if mode == "make":
            anyio.run(_make_store, Path(db), args.n)
            print("{}")
        else:
            print(json.dumps(anyio.run(_replay, Path(db), args.n)))
        return
    load_before = os.getloadavg()[0]
    variants: dict[str, str | None] = {"this": None}
    if args.before is not None:
        variants = {"before": str(args.before.resolve()), **variants}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="evald-replay-") as tmp:
        stored = Path(tmp) / "stored.sqlite3"
        started = time.perf_counter()
        _child(["--n", str(args.n), "--child", "make", str(stored)], None)
        made_s = time.perf_counter() - started
        for _ in range(args.repeats):
            for name, service in variants.items():  # interleaved
                db = Path(tmp) / f"replay-{name}.sqlite3"
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)
                shutil.copy(stored, db)
                _reset(db)
                runs[name].append(
                    _child(["--n", str(args.n), "--child", "replay", str(db)], service)
                )
    summary = {
        name: {
            key: round(statistics.median(r[key] for r in rs), 2)
            for key in ("base_rss_mb", "peak_rss_mb", "scoring_s")
        }
        for name, rs in runs.items()
    }
    report = {
        "benchmark": "server RSS while scoring one large task from the store (replayed)",
        "command": " ".join(["python -m bench.bench_scoring_memory", *sys.argv[1:]]),
        "n": args.n,
        "repeats": args.repeats,
        "store_made_s": round(made_s, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        "variants": {name: service or "this checkout" for name, service in variants.items()},
        "median": summary,
        "runs": runs,
    }
    rows = [
        f"{report['machine']['cpus']} CPUs, load average {load_before:.2f} before, "
        f"{report['machine']['load_avg_1m_after']} after; N = {args.n}, median of {args.repeats}",
        f"{'code':8} {'base MB':>8} {'peak MB':>8} {'peak-base':>9} {'scoring s':>9}",
    ]
    for name, figures in summary.items():
        rows.append(
            f"{name:8} {figures['base_rss_mb']:8.1f} {figures['peak_rss_mb']:8.1f} "
            f"{figures['peak_rss_mb'] - figures['base_rss_mb']:9.1f} {figures['scoring_s']:9.2f}"
        )
    print("\n".join(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
