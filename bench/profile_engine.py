"""Where the engine's CPU per subtask goes: one in-process run of a fixed shape.

    python -m bench.profile_engine [--n 3000] [--c 64] [--latency-ms 0] [--runs 2]
    python -m bench.profile_engine --cprofile /tmp/engine.prof   # the loop's thread
    python -m bench.profile_engine --no-http   # the simulated provider: no HTTP at all
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \\
        .venv/bin/python -m bench.profile_engine --n 1000 --runs 1

Not part of ``make bench`` (a profiling tool, like ``soak``). The engine runs in this
process (a real SQLite file, ``OpenAIProvider``, the real scoring pool) against the
fake in its own process, as in ``bench_engine`` P2. Each run is CreateRun → the run's
end at the watcher; the CPU of each of this process's threads is read from its own
clock (``pthread_getcpuclockid``), so the event loop's thread, the store's threads
and the rest are apart. Instruction counts: run it under callgrind with two values of
``--n`` and take the difference, which leaves out start-up, imports and the fixed
costs of a run; the scoring workers and the fake are other processes and not counted.
"""

import argparse
import cProfile
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio

from bench.bench_engine import TENANT, _config, _upload
from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.fake_provider import FakeProcess


def _thread_clocks() -> dict[str, float]:
    """CPU seconds of each live thread of this process, by thread name."""
    clocks: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            clock = time.pthread_getcpuclockid(thread.ident)
            seconds = time.clock_gettime(clock)
        except OSError:
            continue
        name = thread.name.split(" ")[0] if thread.name.startswith("AnyIO") else thread.name
        clocks[name] = clocks.get(name, 0.0) + seconds
    return clocks


async def _one_run(app: Evald, n: int, profile: cProfile.Profile | None) -> dict[str, Any]:
    spec = RunSpec(models=("bench",), datasets=(DatasetRef(f"bench-{n}", "1.0.0"),))
    threads0, cpu0, start = _thread_clocks(), time.process_time(), time.perf_counter()
    if profile is not None:
        profile.enable()
    run = await app.runs.create(TENANT, spec)
    async for _event in await app.runs.watch(TENANT, run.run_id):
        pass
    if profile is not None:
        profile.disable()
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    ended = time.time()
    threads1 = _thread_clocks()
    tasks = await app.engine.store.get_tasks(run.run_id)
    last_commit = max(t.finished_at or ended for t in tasks)  # the last outcome's commit
    by_thread = {
        name: round((threads1[name] - threads0.get(name, 0.0)) / n * 1e6, 1) for name in threads1
    }
    known = sum(threads1[name] - threads0.get(name, 0.0) for name in threads1)
    by_thread["(threads ended meanwhile)"] = round(max(0.0, cpu - known) / n * 1e6, 1)
    return {
        "wall_s": round(wall, 3),
        "scoring_after_last_commit_s": round(ended - last_commit, 3),
        "cpu_us_per_subtask": round(cpu / n * 1e6, 1),
        "cpu_us_per_subtask_by_thread": dict(sorted(by_thread.items(), key=lambda kv: -kv[1])),
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    profile = cProfile.Profile() if args.cprofile else None
    runs = []
    with tempfile.TemporaryDirectory(prefix="evald-profile-") as tmp:
        fake_args = ("--port", "0", "--max-journal-entries", "0")
        async with FakeProcess(*fake_args, stderr=subprocess.DEVNULL) as fake:
            await fake.control.configure(latency_ms=args.latency_ms)
            url = None if args.no_http else fake.base_url
            config = _config(Path(tmp) / "engine.sqlite3", url, args.c, args.n)
            async with Evald.open(config) as app:
                await _upload(app, args.n)
                for index in range(args.runs):
                    # The first run warms the scoring workers and the provider's pool.
                    runs.append(await _one_run(app, args.n, profile if index else None))
    if profile is not None:
        profile.dump_stats(args.cprofile)
    return {
        "benchmark": "engine CPU per subtask, by thread",
        "command": " ".join(["python -m bench.profile_engine", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        "shape": {
            "n": args.n,
            "concurrency": args.c,
            "provider": "simulated, latency 0" if args.no_http else "openai on the fake",
            "fake_latency_ms": args.latency_ms,
        },
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_engine")
    parser.add_argument("--n", type=int, default=3000)
    parser.add_argument("--c", type=int, default=64)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--runs", type=int, default=2, help="the first one warms up")
    parser.add_argument(
        "--no-http", action="store_true", help="the simulated provider: the engine's own work"
    )
    parser.add_argument("--cprofile", type=Path, help="cProfile the runs after the first")
    parser.add_argument("--out", type=Path, help="write the JSON here")
    args = parser.parse_args(argv)
    report = anyio.run(_main, args, backend="asyncio")
    print(json.dumps(report, indent=2))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
