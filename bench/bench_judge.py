"""Model-graded scoring and the response cache: what a judge costs per sample, and what
a cache hit costs beside a provider call.

    python -m bench.bench_judge [--n 1000] [--concurrency 32] [--latency-ms 50] [--repeats 3]

The real server (its own process) and the SDK on the fake provider (its own process,
fixed latency), which answers for the evaluated model and, with a fixed verdict, for
the judge model (both ``max_concurrency`` = C). Every run is N generation records.

* plain: no judge, no cache — the reference.
* judged: the same with a judge (one round). Judge overhead per sample: the extra wall
  time over the plain run ÷ N, and the extra server CPU ÷ N. Since judging overlaps
  inference, the ideal judged wall is about ceil(N/C)·T + T (the last answer's judge
  call), not twice the plain run.
* cache fill, then cache hits: a run with ``response_cache`` that fills the cache,
  then the same run again, answered entirely from it (the fake's journal must show
  no request). Hit cost per sample: the all-hit run's wall ÷ N and its server CPU ÷
  N, beside the provider call's latency (the plain run's p50) and the plain run's
  server CPU per sample.

Walls run from CreateRun to the run's end (its task scored). Medians of ``--repeats``.
Prints a table and writes ``bench/results/judge.json``.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil

from bench._server_process import server_process
from evald_client import AsyncEvaldClient, JudgeOptions
from evald_server.fake_provider import FakeProcess

RESULTS = Path(__file__).parent / "results" / "judge.json"
VERDICT = "The answer matches the reference.\nVERDICT: PASS"


def _toml(db: Path, fake_url: str, concurrency: int, n: int) -> str:
    models = "".join(
        f"""[[models]]
id = "{model_id}"
provider = "openai"
base_url = "{fake_url}"
model = "{model_id}-llm"
max_concurrency = {concurrency}
timeout_s = 60.0
"""
        for model_id in ("cand", "judge")
    )
    return f"""[server]
listen = "127.0.0.1:0"
grace_s = 2.0
[store]
url = "sqlite:///{db}"
[limits]
max_inflight = {max(256, 2 * concurrency)}
max_subtasks_per_run = {4 * n}
max_records_per_dataset = {n}
max_runs_in_flight_per_tenant = 64
{models}"""


def _records(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"r{i}",
            "input": f"What is {i} plus one? End with the number.",
            "reference": str(i + 1),
        }
        for i in range(n)
    ]


async def _timed_run(
    client: AsyncEvaldClient, server: psutil.Process, **options: Any
) -> dict[str, Any]:
    cpu_before = _cpu(server)
    started = time.perf_counter()
    run = await client.create_run(models=["cand"], datasets=[("bench", "1.0.0")], **options)
    final = await client.wait(run.run_id, timeout_s=600)
    wall = time.perf_counter() - started
    cpu = _cpu(server) - cpu_before
    (result,) = await client.results(run.run_id)
    judge = result.judge_execution
    return {
        "state": final.state.value,
        "wall_s": wall,
        "server_cpu_s": cpu,
        "latency_p50_ms": result.execution.latency_p50_ms,
        "cache_hits": result.execution.cache_hits,
        "requests": result.execution.requests,
        "judge_requests": 0 if judge is None else judge.requests,
        "judge_latency_p50_ms": None if judge is None else judge.latency_p50_ms,
        "judge_pass_rate": result.metrics.get("judge_pass_rate"),
    }


def _cpu(process: psutil.Process) -> float:
    """The server's CPU seconds, its scoring workers included."""
    total = 0.0
    for proc in (process, *process.children(recursive=True)):
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def _write_config(where: Path, fake_url: str, concurrency: int, n: int) -> Path:
    where.mkdir()
    config = where / "evald.toml"
    config.write_text(_toml(where / "evald.sqlite3", fake_url, concurrency, n))
    return config


async def _one_round(args: argparse.Namespace, where: Path, fake: FakeProcess) -> dict[str, Any]:
    config = _write_config(where, fake.base_url, args.concurrency, args.n)
    async with (
        server_process(config, where / "server.stderr") as (address, server),
        AsyncEvaldClient(address) as client,
    ):
        await client.upload_dataset(
            name="bench", version="1.0.0", task_type="generation", records=_records(args.n)
        )
        await _timed_run(client, server)  # warm-up (scoring workers, connections): not counted
        rows = {"plain": await _timed_run(client, server)}
        rows["judged"] = await _timed_run(client, server, judge=JudgeOptions(model_id="judge"))
        rows["cache_fill"] = await _timed_run(client, server, response_cache=True)
        before = (await fake.control.stats())["requests"]
        rows["cache_hits"] = await _timed_run(client, server, response_cache=True)
        rows["cache_hits"]["provider_requests"] = (await fake.control.stats())["requests"] - before
    return rows


def _median(rounds: list[dict[str, Any]], run: str, key: str) -> float:
    return statistics.median(float(r[run][key]) for r in rounds)


def _summary(rounds: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    n = args.n
    plain_wall = _median(rounds, "plain", "wall_s")
    judged_wall = _median(rounds, "judged", "wall_s")
    plain_cpu = _median(rounds, "plain", "server_cpu_s")
    judged_cpu = _median(rounds, "judged", "server_cpu_s")
    hit_wall = _median(rounds, "cache_hits", "wall_s")
    hit_cpu = _median(rounds, "cache_hits", "server_cpu_s")
    waves = -(-n // args.concurrency)
    latency_s = args.latency_ms / 1000.0
    return {
        "plain_wall_s": plain_wall,
        "plain_ideal_wall_s": waves * latency_s,
        "judged_wall_s": judged_wall,
        "judged_ideal_wall_s": waves * latency_s + latency_s,
        "judge_overhead_wall_ms_per_sample": (judged_wall - plain_wall) / n * 1000.0,
        "judge_overhead_cpu_ms_per_sample": (judged_cpu - plain_cpu) / n * 1000.0,
        "plain_cpu_ms_per_sample": plain_cpu / n * 1000.0,
        "judge_latency_p50_ms": _median(rounds, "judged", "judge_latency_p50_ms"),
        "provider_call_p50_ms": _median(rounds, "plain", "latency_p50_ms"),
        "cache_hit_wall_ms_per_sample": hit_wall / n * 1000.0,
        "cache_hit_cpu_ms_per_sample": hit_cpu / n * 1000.0,
        "cache_hits_per_run": _median(rounds, "cache_hits", "cache_hits"),
        "cache_hit_run_provider_requests": max(
            r["cache_hits"]["provider_requests"] for r in rounds
        ),
        "cache_hit_run_speedup": _median(rounds, "cache_fill", "wall_s") / hit_wall,
    }


def _table(report: dict[str, Any]) -> list[str]:
    s = report["summary"]
    return [
        f"N = {report['n']}, C = {report['concurrency']}, fake latency "
        f"{report['latency_ms']:.0f} ms, medians of {report['repeats']}",
        f"plain run        {s['plain_wall_s']:8.2f} s wall "
        f"(ideal {s['plain_ideal_wall_s']:.2f} s), "
        f"server CPU {s['plain_cpu_ms_per_sample']:.3f} ms/sample",
        f"judged run       {s['judged_wall_s']:8.2f} s wall "
        f"(ideal {s['judged_ideal_wall_s']:.2f} s), "
        f"judge call p50 {s['judge_latency_p50_ms']:.1f} ms",
        f"judge overhead   {s['judge_overhead_wall_ms_per_sample']:8.3f} ms wall/sample, "
        f"{s['judge_overhead_cpu_ms_per_sample']:.3f} ms server CPU/sample",
        f"cache hit        {s['cache_hit_wall_ms_per_sample']:8.3f} ms wall/sample, "
        f"{s['cache_hit_cpu_ms_per_sample']:.3f} ms server CPU/sample "
        f"(a provider call: p50 {s['provider_call_p50_ms']:.1f} ms); "
        f"{s['cache_hits_per_run']:.0f} hits, {s['cache_hit_run_provider_requests']} provider "
        f"requests; {s['cache_hit_run_speedup']:.1f}x faster than the run that filled it",
    ]


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    fake_config = json.dumps({"model_answers": {"judge-llm": VERDICT}})
    fake_args = ("--port", "0", "--latency-ms", str(args.latency_ms), "--config-json", fake_config)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="evald-bench-judge-") as tmp:
        async with FakeProcess(*fake_args, stderr=subprocess.DEVNULL) as fake:
            for repeat in range(args.repeats):
                rounds.append(await _one_round(args, Path(tmp) / f"r{repeat}", fake))
    return {
        "n": args.n,
        "concurrency": args.concurrency,
        "latency_ms": args.latency_ms,
        "repeats": args.repeats,
        "summary": _summary(rounds, args),
        "rounds": rounds,
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_judge")
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="N = 200, one repeat")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.repeats = 200, 1
    report = anyio.run(_main, args, backend="asyncio")
    print("\n".join(_table(report)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
