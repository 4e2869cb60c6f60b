"""The engine vs a bare aiohttp worker-pool loop, on the same fake, in the same invocation.

    python -m bench.bench_engine [--repeats 3] [--skip-p3 | --only-p3]

* P1: N = 10,000 subtasks, one model, C = 100, fake latency 50 ms. Target: engine wall
  ≤ 1.15 × the bare loop's wall (ideal ceil(N/C)·T = 5 s).
* P2: fake latency 0, C = 64. Target: engine req/s ≥ 0.75 × the bare loop's req/s.
  P2 also runs the engine on the simulated provider at latency 0 (no HTTP at all): its
  own work per subtask, the most it could reach with a provider call that cost nothing.
* P3: a 100,000-subtask run at latency 0 in a child process whose RSS is sampled
  (psutil, every 50 ms), per phase (create, inference, scoring). Targets: peak RSS
  ≤ 120 MB, and the CreateRun call (timed in the child) answered in ≤ 2 s. P3 is the
  worst case, one model on a 100,000-record dataset (one task of 100,000 samples to
  score at once); P3b spreads the same 100,000 subtasks over five
  models (5 tasks of 20,000). Each dataset is uploaded by an earlier child (as on a
  server where it was uploaded before the run), whose peak is reported too.

The fake runs as its own process (its own core; no journal entries kept). The engine
runs in this process with a real SQLite file, the real OpenAI provider and the real
scoring pool; its wall is from CreateRun (which persists every subtask) to the commit
of the last outcome (the task's ``finished_at``), so scoring is reported beside it,
not in it. Each figure is the median of ``--repeats`` runs, engine and bare
interleaved. Prints a table and writes ``bench/results/engine.json``.
"""

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import psutil  # type: ignore[import-untyped]

from evald_server.app import DatasetHeader, DatasetRef, Evald, RunSpec
from evald_server.config import GenerationParams, ModelConfig, ServerConfig, parse_config
from evald_server.domain import ChatMessage, TaskType
from evald_server.fake_provider import FakeProcess
from evald_server.providers import OpenAIProvider, ProviderRequest

RESULTS = Path(__file__).parent / "results" / "engine.json"
TENANT = "bench"
_BODY = json.dumps(
    {"model": "bench", "messages": [{"role": "user", "content": "Label this review: fine"}]}
).encode()


def _config(
    db: Path,
    fake_url: str | None,
    concurrency: int,
    max_subtasks: int,
    models: int = 1,
) -> ServerConfig:
    """The engine on the fake (OpenAIProvider); ``fake_url`` None: on the simulated
    provider at zero latency, i.e. the engine's own work with no HTTP at all."""
    ids = ["bench"] if models == 1 else [f"bench-{i}" for i in range(models)]
    provider: dict[str, Any] = (
        {"provider": "openai", "base_url": fake_url, "timeout_s": 60}
        if fake_url is not None
        else {"provider": "simulated", "simulator": {"latency_ms_median": 0.0}}
    )
    return parse_config(
        {
            "store": {"url": f"sqlite:///{db}"},
            "limits": {
                "max_inflight": max(256, concurrency),
                "max_subtasks_per_run": max_subtasks,
                "max_records_per_dataset": max_subtasks,
            },
            "models": [
                {"id": model_id, "max_concurrency": concurrency, **provider} for model_id in ids
            ],
        }
    )


def _jsonl(records: int) -> bytes:
    lines = (
        json.dumps(
            {
                "id": f"r{i}",
                "input": f"review {i}",
                "label": "pos" if i % 2 else "neg",
                "choices": ["pos", "neg"],
            }
        )
        for i in range(records)
    )
    return ("\n".join(lines) + "\n").encode()


async def _upload(app: Evald, records: int) -> None:
    header = DatasetHeader(f"bench-{records}", "1.0.0", TaskType.CLASSIFICATION)
    await app.datasets.upload(TENANT, header, [_jsonl(records)])


def _workers_rss_mb() -> float:
    """RSS of this process's scoring workers (spawned children; the fake is not one)."""
    total = 0
    for child in psutil.Process().children(recursive=True):
        try:
            if any("multiprocessing" in part for part in child.cmdline()):
                total += child.memory_info().rss
        except psutil.Error:
            continue
    return total / 2**20


async def _engine_run(app: Evald, records: int) -> dict[str, float]:
    spec = RunSpec(models=("bench",), datasets=(DatasetRef(f"bench-{records}", "1.0.0"),))
    peaks = {"own": 0.0, "workers": 0.0}
    done = anyio.Event()

    async def sample_rss() -> None:  # every 50 ms: this process and its scoring workers
        me = psutil.Process()
        while not done.is_set():
            peaks["own"] = max(peaks["own"], me.memory_info().rss / 2**20)
            peaks["workers"] = max(peaks["workers"], _workers_rss_mb())
            with anyio.move_on_after(0.05):
                await done.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample_rss)
        cpu0, start = time.process_time(), time.time()
        run = await app.runs.create(TENANT, spec)
        async for _event in await app.runs.watch(TENANT, run.run_id):
            pass
        end = time.time()
        done.set()
    cpu = time.process_time() - cpu0
    tasks = await app.engine.store.get_tasks(run.run_id)
    last_commit = max(t.finished_at or end for t in tasks)
    wall = last_commit - start
    return {
        "wall_s": wall,
        "req_per_s": records / wall,
        "wall_incl_scoring_s": end - start,
        "cpu_us_per_req_incl_scoring": cpu / records * 1e6,
        "peak_rss_mb": peaks["own"],
        "workers_peak_rss_mb": peaks["workers"],
    }


async def _bare_run(url: str, requests: int, concurrency: int) -> dict[str, float]:
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=60.0)
    next_index = 0
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def worker() -> None:
            nonlocal next_index
            while next_index < requests:
                index = next_index
                next_index += 1
                headers = {"Content-Type": "application/json", "X-Evald-Subtask": f"bare-{index}"}
                async with session.post(url, data=_BODY, headers=headers) as response:
                    json.loads(await response.read())["choices"][0]["message"]["content"]

        cpu0, start = time.process_time(), time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
        wall = time.perf_counter() - start
    return {
        "wall_s": wall,
        "req_per_s": requests / wall,
        "cpu_us_per_req": (time.process_time() - cpu0) / requests * 1e6,
    }


async def _provider_run(url: str, requests: int, concurrency: int) -> dict[str, float]:
    """OpenAIProvider alone in the same worker pool: splits the engine's gap into what
    the provider adapter costs and what the engine adds."""
    model = ModelConfig(id="bench", provider="openai", base_url=url, timeout_s=60.0)
    provider = OpenAIProvider(model, pool_size=concurrency)
    messages = (ChatMessage("user", "Label this review: fine"),)
    params = GenerationParams()
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < requests:
            index = next_index
            next_index += 1
            await provider.complete(ProviderRequest(messages, params, f"provider-{index}"))

    try:
        cpu0, start = time.process_time(), time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(concurrency):
                tg.start_soon(worker)
        wall = time.perf_counter() - start
    finally:
        await provider.aclose()
    return {
        "wall_s": wall,
        "req_per_s": requests / wall,
        "cpu_us_per_req": (time.process_time() - cpu0) / requests * 1e6,
    }


def _median(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}


async def _compare(
    fake: FakeProcess, name: str, n: int, c: int, latency_ms: float, repeats: int, tmp: Path
) -> dict[str, Any]:
    await fake.control.configure(latency_ms=latency_ms)
    config = _config(tmp / f"{name}.sqlite3", fake.base_url, c, n)
    # At zero latency the engine also runs on the simulated provider: the same run with
    # no HTTP, which splits its cost into its own work and the provider call's.
    no_http = _config(tmp / f"{name}-no-http.sqlite3", None, c, n) if latency_ms == 0 else None
    engine_rows, bare_rows, provider_rows, no_http_rows, peaks = [], [], [], [], []
    async with Evald.open(config) as app, contextlib.AsyncExitStack() as stack:
        await _upload(app, n)
        app_no_http = None
        if no_http is not None:
            app_no_http = await stack.enter_async_context(Evald.open(no_http))
            await _upload(app_no_http, n)
        for _ in range(repeats):
            await fake.control.reset()
            engine_rows.append(await _engine_run(app, n))
            peaks.append((await fake.control.stats())["peak_concurrency_all"])
            bare_rows.append(await _bare_run(fake.base_url + "/v1/chat/completions", n, c))
            provider_rows.append(await _provider_run(fake.base_url, n, c))
            if app_no_http is not None:
                no_http_rows.append(await _engine_run(app_no_http, n))
    engine, bare = _median(engine_rows), _median(bare_rows)
    return {
        "name": name,
        "n": n,
        "concurrency": c,
        "fake_latency_ms": latency_ms,
        "ideal_wall_s": math.ceil(n / c) * latency_ms / 1000.0,
        "engine": engine,
        "bare_aiohttp": bare,
        "provider_only": _median(provider_rows),
        "engine_runs": engine_rows,
        "bare_runs": bare_rows,
        "provider_only_runs": provider_rows,
        "fake_peak_concurrency": peaks,
        "wall_ratio": round(engine["wall_s"] / bare["wall_s"], 3),
        "provider_only_throughput_ratio": round(
            statistics.median(r["req_per_s"] for r in provider_rows) / bare["req_per_s"], 3
        ),
        "throughput_ratio": round(engine["req_per_s"] / bare["req_per_s"], 3),
        **_no_http_figures(no_http_rows, bare),
    }


def _no_http_figures(rows: list[dict[str, float]], bare: dict[str, float]) -> dict[str, Any]:
    """The engine on the simulated provider: its own ceiling, against the bare loop."""
    if not rows:
        return {}
    engine = _median(rows)
    return {
        "engine_no_http": engine,
        "engine_no_http_runs": rows,
        "engine_no_http_throughput_ratio": round(engine["req_per_s"] / bare["req_per_s"], 3),
        "engine_no_http_cpu_vs_bare_cpu": round(
            engine["cpu_us_per_req_incl_scoring"] / bare["cpu_us_per_req"], 3
        ),
    }


# -- P3: memory of a 100,000-subtask run, in child processes ---------------------------------


async def _child(mode: str, db: str, fake_url: str, n: int, c: int, models: int) -> None:
    """One P3 child: ``upload`` a dataset of n / models records, or ``run`` every model
    on it (n subtasks in all), printing its phases for the RSS sampler."""
    records = n // models
    config = _config(Path(db), fake_url, c, n, models)
    async with Evald.open(config) as app:
        if mode == "upload":
            await _upload(app, records)
            return
        spec = RunSpec(
            models=tuple(m.id for m in config.models),
            datasets=(DatasetRef(f"bench-{records}", "1.0.0"),),
        )
        print("PHASE create", flush=True)
        started = time.perf_counter()
        run = await app.runs.create(TENANT, spec)
        print(f"CREATE_RUN_S {time.perf_counter() - started:.4f}", flush=True)
        print("PHASE inference", flush=True)
        scoring = False
        async for event in await app.runs.watch(TENANT, run.run_id):
            if scoring:
                continue
            if event.evaluation is not None:  # a task was scored before the run's end
                scoring = True
            elif event.progress is not None:
                counters = event.progress.counters
                scoring = counters.terminal == counters.total
            if scoring:
                print("PHASE scoring", flush=True)
        print("PHASE done", flush=True)


def _sample(command: list[str]) -> dict[str, Any]:
    """Run ``command``, sampling its RSS (and its children's) every 50 ms, per phase."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, bufsize=1)
    watched = psutil.Process(process.pid)
    peaks: dict[str, float] = {}
    children_peak = 0.0
    phase = "startup"
    create_run_s: float | None = None  # the CreateRun call, timed in the child
    started = time.perf_counter()
    phase_started = {phase: started}
    os.set_blocking(process.stdout.fileno(), False)  # type: ignore[union-attr]
    while process.poll() is None:
        for line in iter(process.stdout.readline, ""):  # type: ignore[union-attr]
            if line.startswith("PHASE "):
                phase = line.split()[1]
                phase_started[phase] = time.perf_counter()
            elif line.startswith("CREATE_RUN_S "):
                create_run_s = float(line.split()[1])
        try:
            rss = watched.memory_info().rss / 2**20
            kids = sum(k.memory_info().rss for k in watched.children(recursive=True)) / 2**20
        except psutil.Error:
            break
        peaks[phase] = max(peaks.get(phase, 0.0), rss)
        children_peak = max(children_peak, kids)
        time.sleep(0.05)
    process.wait()
    ended = time.perf_counter()
    starts = sorted(phase_started.items(), key=lambda item: item[1])
    ends = [t for _, t in starts[1:]] + [ended]
    return {
        "exit_code": process.returncode,
        "seconds": round(ended - started, 1),
        # Wall per phase: "scoring" runs from the last subtask's end to the run's end
        # (reading the outputs, the scorer, storing the per-sample scores).
        "seconds_by_phase": {
            name: round(end - start, 2) for (name, start), end in zip(starts, ends, strict=True)
        },
        "peak_rss_mb_by_phase": {k: round(v, 1) for k, v in peaks.items()},
        "peak_rss_mb": round(max(peaks.values(), default=0.0), 1),
        "scoring_workers_peak_rss_mb": round(children_peak, 1),
        "create_run_s": create_run_s,
    }


async def _p3(
    fake: FakeProcess, name: str, n: int, c: int, models: int, tmp: Path
) -> dict[str, Any]:
    await fake.control.configure(latency_ms=0)
    db = str(tmp / f"{name}.sqlite3")
    base = [sys.executable, "-m", "bench.bench_engine", "--child"]
    tail = [db, fake.base_url, str(n), str(c), str(models)]
    upload = await anyio.to_thread.run_sync(_sample, [*base, "upload", *tail])
    run = await anyio.to_thread.run_sync(_sample, [*base, "run", *tail])
    by_phase = run["peak_rss_mb_by_phase"]
    dispatch_peak = max(by_phase.get("create", 0.0), by_phase.get("inference", 0.0))
    return {
        "name": name,
        "n": n,
        "models": models,
        "records_per_dataset": n // models,
        "concurrency_per_model": c,
        "upload_child": upload,
        "run_child": run,
        "peak_rss_mb_create_and_inference": dispatch_peak,
        "create_run_s": run["create_run_s"],
        "peak_rss_mb": run["peak_rss_mb"],
    }


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    fake_args = ("--port", "0", "--max-journal-entries", "0")
    with tempfile.TemporaryDirectory(prefix="evald-bench-") as tmp_dir:
        tmp = Path(tmp_dir)
        async with FakeProcess(*fake_args, stderr=subprocess.DEVNULL) as fake:
            p1 = p2 = p3 = p3b = None
            if not args.only_p3:
                p1 = await _compare(
                    fake, "P1", args.p1_n, args.p1_c, args.p1_latency_ms, args.repeats, tmp
                )
                p2 = await _compare(fake, "P2", args.p2_n, args.p2_c, 0.0, args.repeats, tmp)
            if not args.skip_p3:
                p3 = await _p3(fake, "P3", args.p3_n, args.p3_c, 1, tmp)
                p3b = await _p3(fake, "P3b", args.p3_n, args.p3_c, args.p3b_models, tmp)
            fake_stats = await fake.control.stats()
    return {
        "benchmark": "engine vs bare aiohttp worker pool",
        "command": " ".join(["python -m bench.bench_engine", *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        "fake_cpu_us_per_request": fake_stats.get("cpu_per_request_us"),
        "targets": {
            "P1": "engine wall <= 1.15 x bare wall",
            "P2": "engine req/s >= 0.75 x bare req/s",
            "P3": "peak RSS <= 120 MB",
            "P3_create_run": "CreateRun of the P3 run answered in <= 2 s",
        },
        "results": {"P1": p1, "P2": p2, "P3": p3, "P3b": p3b},
        "verdict": {
            "P1": None if p1 is None else p1["wall_ratio"] <= 1.15,
            "P2": None if p2 is None else p2["throughput_ratio"] >= 0.75,
            "P3": None if p3 is None else p3["peak_rss_mb"] <= 120,
            "P3_create_and_inference": None
            if p3 is None
            else p3["peak_rss_mb_create_and_inference"] <= 120,
            "P3_create_run": None if p3 is None else p3["create_run_s"] <= 2.0,
            "P3b": None if p3b is None else p3b["peak_rss_mb"] <= 120,
            "P3b_create_run": None if p3b is None else p3b["create_run_s"] <= 2.0,
        },
    }


def _print(report: dict[str, Any]) -> None:
    machine = report["machine"]
    print(
        f"{machine['cpus']} CPUs, load average before {machine['load_avg_1m_before']}, "
        f"fake CPU/request {report['fake_cpu_us_per_request']:.0f} µs (own process)"
    )
    print(
        f"{'':4} {'N':>7} {'C':>4} {'lat ms':>6} {'ideal s':>7} {'engine s':>8} {'bare s':>7} "
        f"{'eng req/s':>9} {'bare req/s':>10} {'ratio':>6}  target"
    )
    for key in ("P1", "P2"):
        r = report["results"][key]
        if r is None:
            continue
        ratio, target = (
            (r["wall_ratio"], "wall ≤ 1.15×")
            if key == "P1"
            else (r["throughput_ratio"], "req/s ≥ 0.75×")
        )
        ok = "met" if report["verdict"][key] else "MISSED"
        print(
            f"{key:4} {r['n']:>7} {r['concurrency']:>4} {r['fake_latency_ms']:>6.0f} "
            f"{r['ideal_wall_s']:>7.2f} {r['engine']['wall_s']:>8.2f} "
            f"{r['bare_aiohttp']['wall_s']:>7.2f} {r['engine']['req_per_s']:>9.0f} "
            f"{r['bare_aiohttp']['req_per_s']:>10.0f} {ratio:>6.2f}  "
            f"{target} {ok}"
        )
    for key in ("P1", "P2"):
        r = report["results"][key]
        if r is None:
            continue
        print(
            f"{key}: OpenAIProvider alone in the same pool: {r['provider_only']['req_per_s']:.0f} "
            f"req/s ({r['provider_only_throughput_ratio']:.2f}× bare); CPU µs/request: bare "
            f"{r['bare_aiohttp']['cpu_us_per_req']:.0f}, "
            f"provider {r['provider_only']['cpu_us_per_req']:.0f}, "
            f"engine {r['engine']['cpu_us_per_req_incl_scoring']:.0f} (incl. scoring); "
            f"peak RSS: this process {r['engine']['peak_rss_mb']:.0f} MB, scoring workers "
            f"{r['engine']['workers_peak_rss_mb']:.0f} MB"
        )
        if "engine_no_http" in r:
            own = r["engine_no_http"]
            print(
                f"{key}: the engine with no HTTP (simulated provider, latency 0): "
                f"{own['req_per_s']:.0f} req/s ({r['engine_no_http_throughput_ratio']:.2f}× "
                f"bare), CPU µs/subtask {own['cpu_us_per_req_incl_scoring']:.0f} "
                f"({r['engine_no_http_cpu_vs_bare_cpu']:.2f}× the bare loop's per request)"
            )
    for key in ("P3", "P3b"):
        p3 = report["results"][key]
        if p3 is None:
            continue
        ok = "met" if report["verdict"][key] else "MISSED"
        print(
            f"{key:4} {p3['n']:>7} subtasks ({p3['models']} model(s) × {p3['records_per_dataset']} "
            f"records): peak RSS {p3['peak_rss_mb']:.0f} MB, create+inference "
            f"{p3['peak_rss_mb_create_and_inference']:.0f} MB; by phase "
            f"{p3['run_child']['peak_rss_mb_by_phase']}; seconds by phase "
            f"{p3['run_child']['seconds_by_phase']}; upload child "
            f"{p3['upload_child']['peak_rss_mb']:.0f} MB; scoring workers "
            f"{p3['run_child']['scoring_workers_peak_rss_mb']:.0f} MB; target ≤ 120 MB {ok}"
        )
        create_ok = "met" if report["verdict"][f"{key}_create_run"] else "MISSED"
        print(
            f"{key:4} CreateRun of {p3['n']} subtasks answered in "
            f"{p3['create_run_s']:.2f} s; target ≤ 2 s {create_ok}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_engine")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--p1-n", type=int, default=10_000)
    parser.add_argument("--p1-c", type=int, default=100)
    parser.add_argument("--p1-latency-ms", type=float, default=50.0)
    parser.add_argument("--p2-n", type=int, default=10_000)
    parser.add_argument("--p2-c", type=int, default=64)
    parser.add_argument("--p3-n", type=int, default=100_000)
    parser.add_argument("--p3-c", type=int, default=64)
    parser.add_argument("--p3b-models", type=int, default=5)
    parser.add_argument("--skip-p3", action="store_true")
    parser.add_argument("--only-p3", action="store_true", help="P3 and P3b, without P1 and P2")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--child", nargs=6, metavar=("MODE", "DB", "URL", "N", "C", "M"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        mode, db, url, n, c, m = args.child
        anyio.run(_child, mode, db, url, int(n), int(c), int(m), backend="asyncio")
        return
    report = anyio.run(_main, args, backend="asyncio")
    _print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
