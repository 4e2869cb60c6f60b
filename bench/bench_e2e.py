"""End to end: the real gRPC server (its own process) and the SDK, on the fake provider
(its own process), each figure beside its reference measured in the same invocation.

    python -m bench.bench_e2e [--quick] [--repeats 3] [--figures P1,P3,P5] [--peer-n N]

* P1: N = 10,000 classification subtasks, one model, C = 100, fake latency 50 ms.
  evald's wall is CreateRun → the last result reaching the watcher (the task scored).
  References: a bare aiohttp worker loop on the same fake (``bench.bench_engine``'s;
  target evald ≤ 1.15 × its wall; ideal ceil(N/C)·T = 5 s), and pydantic-evals
  (``Dataset.evaluate(task, max_concurrency=100)``, the task an ``httpx.AsyncClient``
  POST, an ``EqualsExpected`` evaluator; target evald ≥ 10 × faster). pydantic-evals
  runs N cases (about a minute here); with ``--quick`` or a smaller ``--peer-n`` its
  wall is extrapolated linearly to N (it is CPU-bound: its case rate does not depend
  on N), and the table says so.
* P3: one 100,000-subtask run (fake latency 0): peak RSS of the server process
  (psutil, every 50 ms; its scoring workers reported apart). Target ≤ 120 MB; its
  CreateRun answered in ≤ 2 s. Each repeat starts a fresh server on the store where the
  dataset was uploaded.
* P4: progress latency, from the P1 runs: for the k-th answer the fake sent (its
  journal's time), the time until the watcher received a progress snapshot counting
  k succeeded. p50 and p99; target p99 ≤ 1.2 s.
* P5: watch-evaluation overlap: 4 datasets (classification, qa, summarization,
  generation; 2,500 records each) in one run: does the first task's result reach the
  watcher before the last task's inference ends, and how much sooner the run ends
  than inference-then-scoring would (Σ scoring times after the last answer).
* P7 (with P1, on its server): the whole job as a user's script does it, in a fresh
  client process (``bench._client_job``): interpreter start, SDK imports, upload of
  the N records as a JSONL file, CreateRun, the watch to the run's end, the results,
  exit; timed from the spawn to the exit, against the ideal ceil(N/C)·T. Target
  ≤ 1.15 × ideal.
* P6 (only when named in ``--figures``): one 1,000,000-subtask run, 100,000 records ×
  repeat 10 in one task (``--large-records``, ``--large-repeat``), fake latency 0, the
  limits raised in the benchmark's own config: it completes, the server's peak RSS by
  phase (target ≤ 250 MB), its wall and CreateRun's answer time. Run once.

Every figure is the median of ``--repeats`` runs (``--quick``: 1). Prints a table and
writes ``bench/results/e2e.json``.
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
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
from pydantic_evals import Case, Dataset
from pydantic_evals.evaluators import EqualsExpected

from bench import _stacks
from bench._server_process import server_process
from bench.bench_engine import _bare_run  # the same reference loop as the engine bench
from evald_client import AsyncEvaldClient, DatasetRef, Progress, TaskScored
from evald_server.fake_provider import FakeControl, FakeProcess

RESULTS = Path(__file__).parent / "results" / "e2e.json"
PROFILE_DIR: Path | None = None  # --profile-server
SAMPLE_DIR: Path | None = None  # --py-spy: the P1 runs' stacks, and where the CPU goes


# -- the server as a child process ------------------------------------------------------------


def _toml(db: Path, fake_url: str, concurrency: int, max_subtasks: int, max_records: int) -> str:
    return f"""[server]
listen = "127.0.0.1:0"
grace_s = 2.0
[store]
url = "sqlite:///{db}"
[limits]
max_inflight = {max(256, concurrency)}
max_subtasks_per_run = {max_subtasks}
max_records_per_dataset = {max_records}
[[models]]
id = "bench"
provider = "openai"
base_url = "{fake_url}"
max_concurrency = {concurrency}
timeout_s = 60.0
"""


def _write_config(
    where: Path, fake_url: str, concurrency: int, max_subtasks: int, max_records: int
) -> Path:
    where.mkdir(exist_ok=True)
    config = where / "evald.toml"
    toml = _toml(where / "evald.sqlite3", fake_url, concurrency, max_subtasks, max_records)
    config.write_text(toml)
    return config


@asynccontextmanager
async def evald_server(
    where: Path, fake_url: str, concurrency: int, max_subtasks: int, max_records: int | None = None
) -> AsyncIterator[tuple[str, psutil.Process]]:
    """``python -m evald_server.api`` with its config and store in ``where``; yields
    (address, process). SIGTERM (a drain) on the way out."""
    records = max_subtasks if max_records is None else max_records
    config = _write_config(where, fake_url, concurrency, max_subtasks, records)
    options: list[str] = []
    if PROFILE_DIR is not None:  # cProfile of the whole server, written when it stops
        options = ["-m", "cProfile", "-o", str(PROFILE_DIR / f"server-{where.name}.prof")]
    async with server_process(config, where / "server.stderr", python_options=options) as served:
        yield served


def _records(n: int, task_type: str = "classification") -> list[dict[str, Any]]:
    if task_type == "qa":
        return [
            {"id": f"q{i}", "question": f"What is item {i}?", "answers": [f"item {i}"]}
            for i in range(n)
        ]
    if task_type == "summarization":
        return [
            {
                "id": f"s{i}",
                "document": f"Report {i}. " + "The committee met and agreed on a plan. " * 8,
                "summary": f"The committee agreed on plan {i}.",
            }
            for i in range(n)
        ]
    if task_type == "generation":
        return [{"id": f"g{i}", "input": f"Repeat: {i}", "reference": f"{i}"} for i in range(n)]
    return [
        {"id": f"r{i}", "input": f"review {i}", "label": "pos" if i % 2 else "neg"}
        for i in range(n)
    ]


# -- one evald run, watched ----------------------------------------------------------------------


def _cpu_s(process: psutil.Process) -> tuple[float, float]:
    """CPU seconds so far of the server process and of its children (scoring workers)."""
    own = process.cpu_times()
    kids = 0.0
    for child in process.children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:
            continue
        kids += times.user + times.system
    return own.user + own.system, kids


async def _evald_run(
    client: AsyncEvaldClient,
    fake: FakeControl,
    datasets: Sequence[DatasetRef],
    server: psutil.Process,
) -> dict[str, Any]:
    """CreateRun → terminal, with every progress snapshot and result timed on arrival."""
    await fake.reset()
    cpu_before = _cpu_s(server)
    sampler = RssSampler(server)
    started = time.time()
    progress: list[tuple[float, int]] = []  # (received at, succeeded)
    scored: list[tuple[float, str, float]] = []  # (received at, task_id, scoring time)
    async with anyio.create_task_group() as tg:
        tg.start_soon(sampler.run)
        sampler.phase = "run"
        run = await client.create_run(models=["bench"], datasets=list(datasets))
        async for event in client.watch(run.run_id):
            now = time.time()
            if isinstance(event, Progress):
                progress.append((now, event.progress.counts.succeeded))
            elif isinstance(event, TaskScored):
                result = event.result
                scored.append((now, result.task_id, result.execution.scoring_time_s))
        sampler.stop.set()
    cpu_after = _cpu_s(server)
    final = await client.get_run(run.run_id)
    journal = [e for e in await fake.journal() if e.outcome == "ok" and e.finished_at]
    stats = await fake.stats()
    answered_at = sorted(e.finished_at for e in journal if e.finished_at is not None)
    inference_end: dict[str, float] = {}
    for entry in journal:
        task_id = (entry.key or "").rsplit(".", 2)[0]
        inference_end[task_id] = max(inference_end.get(task_id, 0.0), entry.finished_at or 0.0)
    return {
        "state": final.state.value,
        "succeeded": final.progress.counts.succeeded,
        "wall_s": scored[-1][0] - started,
        "inference_wall_s": answered_at[-1] - started,
        "watch_end_s": time.time() - started,
        "fake_cpu_us_per_request": stats["cpu_per_request_us"],
        "server_cpu_us_per_subtask": (cpu_after[0] - cpu_before[0]) / len(answered_at) * 1e6,
        "scoring_workers_cpu_s": cpu_after[1] - cpu_before[1],
        "server_peak_rss_mb": round(sampler.peak, 1),
        "workers_peak_rss_mb": round(sampler.workers, 1),
        "fake_peak_concurrency": stats["peak_concurrency_all"],
        "progress_latency_s": _progress_latency(answered_at, progress),
        "scored": [(t - started, task, s) for t, task, s in scored],
        "inference_end_s": {task: t - started for task, t in inference_end.items()},
    }


async def _client_job(address: str, path: Path, name: str, fake: FakeControl) -> dict[str, Any]:
    """P7: ``bench._client_job`` in a fresh process, timed from its spawn to its exit."""
    await fake.reset()
    spawned = time.time()
    done = await anyio.run_process(
        [sys.executable, "-m", "bench._client_job", address, str(path), name, repr(spawned)],
        check=True,
    )
    wall = time.time() - spawned
    return {"wall_s": round(wall, 3), "phase_ends_s": json.loads(done.stdout)}


def _progress_latency(answered_at: list[float], progress: list[tuple[float, int]]) -> list[float]:
    """For the k-th answer: when the first snapshot counting k succeeded arrived, minus
    when the fake sent the answer."""
    latencies = []
    cursor = 0
    for k, sent in enumerate(answered_at, start=1):
        while cursor < len(progress) and progress[cursor][1] < k:
            cursor += 1
        if cursor == len(progress):
            break  # counted only by the terminal state, not a snapshot
        latencies.append(progress[cursor][0] - sent)
    return latencies


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _median(values: Sequence[float]) -> float:
    return round(statistics.median(values), 3)


async def _warm_up(client: AsyncEvaldClient) -> None:
    """One small scored run: a long-lived server has its scoring workers started."""
    await client.upload_dataset(
        name="warm-up", version="1.0.0", task_type="classification", records=_records(100)
    )
    run = await client.create_run(models=["bench"], datasets=[("warm-up", "1.0.0")])
    await client.wait(run.run_id, timeout_s=120)


# -- P1 and P4 ---------------------------------------------------------------------------------


async def _pydantic_evals(url: str, n: int, concurrency: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=60.0) as http:

        async def task(text: str) -> str:
            body = {"model": "bench", "messages": [{"role": "user", "content": text}]}
            response = await http.post(url, json=body)
            response.raise_for_status()
            return str(response.json()["choices"][0]["message"]["content"])

        dataset = Dataset(
            name="bench",
            cases=[
                Case(name=f"c{i}", inputs=f"review {i}", expected_output=f"review {i}")
                for i in range(n)
            ],
            evaluators=[EqualsExpected()],
        )
        started = time.perf_counter()
        report = await dataset.evaluate(task, max_concurrency=concurrency, progress=False)
        wall = time.perf_counter() - started
    assert not report.failures, report.failures[:3]
    return {"n": n, "wall_s": wall, "cases_per_s": n / wall}


async def _p1(fake: FakeProcess, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    n, c = args.n, args.concurrency
    await fake.control.configure(latency_ms=args.latency_ms)
    url = fake.base_url + "/v1/chat/completions"
    evald_runs, bare_runs, peer_runs, job_runs = [], [], [], []
    async with (
        evald_server(tmp / "p1", fake.base_url, c, n) as (address, server),
        AsyncEvaldClient(address, timeout_s=300) as client,
    ):
        await client.upload_dataset(
            name="p1", version="1.0.0", task_type="classification", records=_records(n)
        )
        await _warm_up(client)
        job_file = tmp / "p7.jsonl"
        job_file.write_text("".join(json.dumps(r) + "\n" for r in _records(n)))
        for i in range(args.repeats):  # interleaved, so drift hits all four alike
            with contextlib.ExitStack() as sampling:
                if SAMPLE_DIR is not None:
                    sampling.enter_context(_stacks.sample(server.pid, SAMPLE_DIR / f"p1-{i}.txt"))
                evald_runs.append(
                    await _evald_run(client, fake.control, [DatasetRef("p1", "1.0.0")], server)
                )
            bare_runs.append(await _bare_run(url, n, c))
            peer_runs.append(await _pydantic_evals(url, args.peer_n, c))
            job_runs.append(await _client_job(address, job_file, f"p7-{i}", fake.control))
    assert all(r["state"] == "succeeded" and r["succeeded"] == n for r in evald_runs)
    evald_wall = _median([r["wall_s"] for r in evald_runs])
    bare_wall = _median([r["wall_s"] for r in bare_runs])
    job_wall = _median([r["wall_s"] for r in job_runs])
    peer_wall = _median([r["wall_s"] for r in peer_runs]) * n / args.peer_n
    latencies = [[*r["progress_latency_s"]] for r in evald_runs]
    breakdown: dict[str, Any] | None = None
    if SAMPLE_DIR is not None:
        samples: Counter[str] = Counter()
        for i in range(args.repeats):
            samples.update(_stacks.breakdown(SAMPLE_DIR / f"p1-{i}.txt"))
        cpu = _median([r["server_cpu_us_per_subtask"] for r in evald_runs])
        breakdown = {"samples": dict(samples), "us_per_subtask": _stacks.shares_us(samples, cpu)}
    return {
        "n": n,
        "concurrency": c,
        "fake_latency_ms": args.latency_ms,
        "ideal_wall_s": math.ceil(n / c) * args.latency_ms / 1000.0,
        "evald_wall_s": evald_wall,
        "evald_inference_wall_s": _median([r["inference_wall_s"] for r in evald_runs]),
        "bare_aiohttp_wall_s": bare_wall,
        "pydantic_evals_wall_s": round(peer_wall, 3),
        "pydantic_evals_n": args.peer_n,
        "pydantic_evals_extrapolated": args.peer_n != n,
        "pydantic_evals_cases_per_s": _median([r["cases_per_s"] for r in peer_runs]),
        "ratio_vs_bare": round(evald_wall / bare_wall, 3),
        "inference_ratio_vs_bare": round(
            _median([r["inference_wall_s"] for r in evald_runs]) / bare_wall, 3
        ),
        "server_cpu_us_per_subtask": _median([r["server_cpu_us_per_subtask"] for r in evald_runs]),
        "bare_cpu_us_per_request": _median([r["cpu_us_per_req"] for r in bare_runs]),
        "scoring_s": _median([r["scored"][-1][2] for r in evald_runs]),
        "server_peak_rss_mb": max(r["server_peak_rss_mb"] for r in evald_runs),
        "workers_peak_rss_mb": max(r["workers_peak_rss_mb"] for r in evald_runs),
        "speedup_vs_pydantic_evals": round(peer_wall / evald_wall, 2),
        "fake_cpu_us_per_request": _median([r["fake_cpu_us_per_request"] for r in evald_runs]),
        "fake_peak_concurrency": [r["fake_peak_concurrency"] for r in evald_runs],
        "P4": {
            "p50_s": _median([_quantile(x, 0.5) for x in latencies]),
            "p99_s": _median([_quantile(x, 0.99) for x in latencies]),
            "max_s": _median([max(x) for x in latencies]),
            "snapshots_measured": [len(x) for x in latencies],
        },
        "server_cpu_breakdown": breakdown,
        "P7": {
            "wall_s": job_wall,
            "ratio_vs_ideal": round(job_wall / (math.ceil(n / c) * args.latency_ms / 1e3), 3),
            "ratio_vs_bare": round(job_wall / bare_wall, 3),
            # The floor under the target: the bare loop's own inference, nothing else.
            "bare_ratio_vs_ideal": round(bare_wall / (math.ceil(n / c) * args.latency_ms / 1e3), 3),
            "phase_ends_s": {
                phase: _median([r["phase_ends_s"][phase] for r in job_runs])
                for phase in job_runs[0]["phase_ends_s"]
            },
            "runs": job_runs,
        },
        "evald_runs": [
            {k: v for k, v in r.items() if k != "progress_latency_s"} for r in evald_runs
        ],
        "bare_runs": bare_runs,
        "pydantic_evals_runs": peer_runs,
    }


# -- P3 ---------------------------------------------------------------------------------------


class RssSampler:
    """The server's peak RSS (and its workers') per phase, sampled every 50 ms."""

    def __init__(self, process: psutil.Process) -> None:
        self.process = process
        self.phase = "startup"
        self.server: dict[str, float] = {}
        self.workers = 0.0
        self.stop = anyio.Event()

    async def run(self) -> None:
        while not self.stop.is_set():
            try:
                rss = self.process.memory_info().rss / 2**20
                kids = self.process.children(recursive=True)
                workers = sum(k.memory_info().rss for k in kids) / 2**20
            except psutil.Error:
                return
            self.server[self.phase] = max(self.server.get(self.phase, 0.0), rss)
            self.workers = max(self.workers, workers)
            with anyio.move_on_after(0.05):
                await self.stop.wait()

    @property
    def peak(self) -> float:
        return max(self.server.values(), default=0.0)


async def _p3_run(
    client: AsyncEvaldClient, sampler: RssSampler, n: int, dataset: str = "p3", repeat: int = 1
) -> dict[str, Any]:
    """One run, its phases marked from the watch: create, inference, scoring. Its wall,
    the CreateRun call's answer time and each phase's wall."""
    started = time.perf_counter()
    sampler.phase = "create"
    run = await client.create_run(models=["bench"], datasets=[(dataset, "1.0.0")], repeat=repeat)
    created = time.perf_counter()
    sampler.phase = "inference"
    inference_end = None
    async for event in client.watch(run.run_id):
        if (
            inference_end is None
            and isinstance(event, Progress)
            and event.progress.counts.finished >= n
        ):
            inference_end = time.perf_counter()
            sampler.phase = "scoring"
    ended = time.perf_counter()
    sampler.phase = "done"
    final = await client.get_run(run.run_id)
    assert final.progress.counts.succeeded == n, final.progress.counts
    assert final.state.value == "succeeded", f"the run ended {final.state.value}"  # scored
    inference_end = inference_end or ended
    return {
        "wall_s": round(ended - started, 2),
        "create_run_s": round(created - started, 3),
        "seconds_by_phase": {
            "create": round(created - started, 2),
            "inference": round(inference_end - created, 2),
            "scoring": round(ended - inference_end, 2),
        },
    }


async def _p3(fake: FakeProcess, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    n = args.p3_n
    await fake.control.configure(latency_ms=0)
    where = tmp / "p3"
    upload_peak = 0.0
    runs: list[dict[str, Any]] = []
    for repeat in range(args.repeats + 1):  # the first server only uploads the dataset
        async with (
            evald_server(where, fake.base_url, args.concurrency, n) as (address, process),
            anyio.create_task_group() as tg,
            AsyncEvaldClient(address, timeout_s=600) as client,
        ):
            sampler = RssSampler(process)
            tg.start_soon(sampler.run)
            if repeat == 0:
                sampler.phase = "upload"
                await client.upload_dataset(
                    name="p3", version="1.0.0", task_type="classification", records=_records(n)
                )
                upload_peak = sampler.peak
            else:
                timed = await _p3_run(client, sampler, n)
                runs.append(
                    {
                        **timed,
                        "peak_rss_mb": round(sampler.peak, 1),
                        "peak_rss_mb_by_phase": {k: round(v, 1) for k, v in sampler.server.items()},
                        "workers_peak_rss_mb": round(sampler.workers, 1),
                    }
                )
            sampler.stop.set()
    phases = {p for r in runs for p in r["peak_rss_mb_by_phase"]}
    return {
        "n": n,
        "concurrency": args.concurrency,
        "peak_rss_mb": _median([r["peak_rss_mb"] for r in runs]),
        "peak_rss_mb_by_phase": {
            p: _median([r["peak_rss_mb_by_phase"].get(p, 0.0) for r in runs]) for p in phases
        },
        "wall_s": _median([r["wall_s"] for r in runs]),
        "create_run_s": _median([r["create_run_s"] for r in runs]),
        "workers_peak_rss_mb": _median([r["workers_peak_rss_mb"] for r in runs]),
        "upload_peak_rss_mb": round(upload_peak, 1),
        "runs": runs,
    }


# -- P6: one 1,000,000-subtask run ----------------------------------------------------------


async def _p6(fake: FakeProcess, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """``--large-records`` records × ``--large-repeat`` repeats, one model: one task of
    (by default) 1,000,000 subtasks, run once (fake latency 0, C = ``--concurrency``) on
    a fresh server whose limits are raised to fit it. The dataset is uploaded by a first
    server, as for P3. The server's peak RSS by phase, the scoring workers' apart."""
    records, repeat = args.large_records, args.large_repeat
    n = records * repeat
    await fake.control.configure(latency_ms=0)
    where = tmp / "p6"
    result: dict[str, Any] = {"n": n, "records": records, "repeat": repeat}
    for step in ("upload", "run"):
        async with (
            evald_server(where, fake.base_url, args.concurrency, n, max_records=records) as (
                address,
                process,
            ),
            anyio.create_task_group() as tg,
            AsyncEvaldClient(address, timeout_s=3600) as client,
        ):
            sampler = RssSampler(process)
            tg.start_soon(sampler.run)
            if step == "upload":
                sampler.phase = "upload"
                started = time.perf_counter()
                await client.upload_dataset(
                    name="p6",
                    version="1.0.0",
                    task_type="classification",
                    records=_records(records),
                )
                result["upload_s"] = round(time.perf_counter() - started, 2)
                result["upload_peak_rss_mb"] = round(sampler.peak, 1)
            else:
                cpu_before = _cpu_s(process)
                result.update(await _p3_run(client, sampler, n, "p6", repeat))
                cpu_after = _cpu_s(process)
                result["server_cpu_us_per_subtask"] = round(
                    (cpu_after[0] - cpu_before[0]) / n * 1e6, 1
                )
                result["scoring_workers_cpu_s"] = round(cpu_after[1] - cpu_before[1], 1)
                result["peak_rss_mb"] = round(sampler.peak, 1)
                result["peak_rss_mb_by_phase"] = {k: round(v, 1) for k, v in sampler.server.items()}
                result["workers_peak_rss_mb"] = round(sampler.workers, 1)
            sampler.stop.set()
    return result


# -- P5 ---------------------------------------------------------------------------------------


async def _p5(fake: FakeProcess, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    per = args.p5_records
    kinds = ("classification", "qa", "summarization", "generation")
    await fake.control.configure(latency_ms=args.latency_ms)
    runs = []
    async with (
        evald_server(tmp / "p5", fake.base_url, args.concurrency, 4 * per) as (address, server),
        AsyncEvaldClient(address, timeout_s=300) as client,
    ):
        for kind in kinds:
            await client.upload_dataset(
                name=f"p5-{kind}", version="1.0.0", task_type=kind, records=_records(per, kind)
            )
        refs = [DatasetRef(f"p5-{kind}", "1.0.0") for kind in kinds]
        await _warm_up(client)
        for _ in range(args.repeats):
            runs.append(await _evald_run(client, fake.control, refs, server))
    rows = []
    for r in runs:
        first_result = r["scored"][0][0]
        inference_end = max(r["inference_end_s"].values())
        serial_end = inference_end + sum(s for _, _, s in r["scored"])  # score after all inference
        rows.append(
            {
                "first_result_s": round(first_result, 3),
                "last_inference_end_s": round(inference_end, 3),
                "first_result_before_last_inference_end": first_result < inference_end,
                "end_s": round(r["wall_s"], 3),
                "serial_end_s": round(serial_end, 3),
                "saved_s": round(serial_end - r["wall_s"], 3),
                "scoring_s": {task: round(s, 3) for _, task, s in r["scored"]},
            }
        )
    return {
        "datasets": list(kinds),
        "records_per_dataset": per,
        "first_result_s": _median([x["first_result_s"] for x in rows]),
        "last_inference_end_s": _median([x["last_inference_end_s"] for x in rows]),
        "overlap": all(x["first_result_before_last_inference_end"] for x in rows),
        "end_s": _median([x["end_s"] for x in rows]),
        "serial_end_s": _median([x["serial_end_s"] for x in rows]),
        "saved_s": _median([x["saved_s"] for x in rows]),
        "runs": rows,
    }


# -- report -------------------------------------------------------------------------------------


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="evald-e2e-") as tmp_dir:
        tmp = Path(tmp_dir)
        fake_args = ("--port", "0", "--max-journal-entries", str(max(args.n, 4 * args.p5_records)))
        async with FakeProcess(*fake_args, stderr=subprocess.DEVNULL) as fake:
            p1 = await _p1(fake, args, tmp) if "P1" in args.figures else None
            p5 = await _p5(fake, args, tmp) if "P5" in args.figures else None
            p3 = await _p3(fake, args, tmp) if "P3" in args.figures else None
            p6 = await _p6(fake, args, tmp) if "P6" in args.figures else None
    verdict = {
        "P1_vs_bare": None if p1 is None else p1["ratio_vs_bare"] <= 1.10,
        "P1_scoring": None if p1 is None else p1["scoring_s"] <= 0.15,
        "P7": None if p1 is None else p1["P7"]["ratio_vs_ideal"] <= 1.15,
        "P1_vs_pydantic_evals": None if p1 is None else p1["speedup_vs_pydantic_evals"] >= 10,
        "P1_memory": None
        if p1 is None
        else p1["server_peak_rss_mb"] + p1["workers_peak_rss_mb"] <= 200,
        "P3": None if p3 is None else p3["peak_rss_mb"] <= 120,
        "P3_create_run": None if p3 is None else p3["create_run_s"] <= 2.0,
        "P4": None if p1 is None else p1["P4"]["p99_s"] <= 1.2,
        "P5": None if p5 is None else p5["overlap"],
        "P6": None if p6 is None else p6["peak_rss_mb"] <= 250,
    }
    return {
        "benchmark": "end to end: gRPC server + SDK vs bare aiohttp and pydantic-evals",
        "command": " ".join(["python -m bench.bench_e2e", *sys.argv[1:]]),
        "repeats": args.repeats,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        "fake": "separate process (python -m evald_server.fake_provider)",
        "fake_cpu_us_per_request": None if p1 is None else p1["fake_cpu_us_per_request"],
        "targets": {
            "P1_vs_bare": "evald wall <= 1.10 x bare aiohttp wall",
            "P1_scoring": "scoring after the last answer <= 0.15 s",
            "P7": "the whole job in a fresh client process <= 1.15 x ideal",
            "P1_vs_pydantic_evals": "evald >= 10 x faster than pydantic-evals",
            "P1_memory": "peak RSS, server + scoring workers <= 200 MB",
            "P3": "server peak RSS <= 120 MB",
            "P3_create_run": "CreateRun of the P3 run answered in <= 2 s",
            "P4": "progress latency p99 <= 1.2 s",
            "P5": "first result before the last task's inference ends",
            "P6": "a 1,000,000-subtask run completes, server peak RSS <= 250 MB",
        },
        "results": {"P1": p1, "P3": p3, "P5": p5, "P6": p6},
        "verdict": verdict,
    }


def _row(figure: str, evald: str, reference: str, ratio: str, target: str) -> str:
    return f"{figure:36} {evald:>9} {reference:>9}  {ratio:>7}  {target}"


def _phases_s(figure: dict[str, Any]) -> dict[str, float]:
    """A figure's seconds by phase (P3: the median over its runs)."""
    if "seconds_by_phase" in figure:
        return dict(figure["seconds_by_phase"])
    runs = figure["runs"]
    return {
        k: _median([r["seconds_by_phase"][k] for r in runs]) for k in runs[0]["seconds_by_phase"]
    }


def _p1_rows(p1: dict[str, Any], v: dict[str, str]) -> list[str]:
    n, c, t = p1["n"], p1["concurrency"], int(p1["fake_latency_ms"])
    p7 = p1["P7"]
    peer = f"{p1['pydantic_evals_n']} cases" + (
        f", extrapolated to {n}" if p1["pydantic_evals_extrapolated"] else ""
    )
    return [
        _row(
            f"P1 wall s, N={n} C={c} T={t} ms",
            f"{p1['evald_wall_s']:.2f}",
            f"{p1['bare_aiohttp_wall_s']:.2f}",
            f"{p1['ratio_vs_bare']:.2f}x",
            f"<= 1.10x bare aiohttp (ideal {p1['ideal_wall_s']:.1f} s) {v['P1_vs_bare']}",
        ),
        _row(
            "P1 of which inference (last answer) s",
            f"{p1['evald_inference_wall_s']:.2f}",
            f"{p1['bare_aiohttp_wall_s']:.2f}",
            f"{p1['inference_ratio_vs_bare']:.2f}x",
            f"then scoring {p1['scoring_s']:.2f} s (<= 0.15 s {v['P1_scoring']}); "
            f"CPU/request: evald server "
            f"{p1['server_cpu_us_per_subtask']:.0f} µs, "
            f"bare loop {p1['bare_cpu_us_per_request']:.0f} µs",
        ),
        _row(
            "P1 peak RSS MB, server / workers",
            f"{p1['server_peak_rss_mb']:.1f}",
            f"{p1['workers_peak_rss_mb']:.1f}",
            "",
            f"server + scoring workers {p1['server_peak_rss_mb'] + p1['workers_peak_rss_mb']:.0f}"
            f" MB (<= 200 MB {v['P1_memory']})",
        ),
        _row(
            "P1 wall s vs pydantic-evals",
            f"{p1['evald_wall_s']:.2f}",
            f"{p1['pydantic_evals_wall_s']:.2f}",
            f"{p1['speedup_vs_pydantic_evals']:.1f}x",
            f">= 10x faster {v['P1_vs_pydantic_evals']} (pydantic-evals: {peer})",
        ),
        _row(
            "P4 progress latency s, p50 / p99",
            f"{p1['P4']['p50_s']:.3f}",
            f"{p1['P4']['p99_s']:.3f}",
            "",
            f"p99 <= 1.2 s {v['P4']}",
        ),
        _row(
            "P7 whole job, fresh client process s",
            f"{p7['wall_s']:.2f}",
            f"{p1['ideal_wall_s']:.2f}",
            f"{p7['ratio_vs_ideal']:.2f}x",
            f"<= 1.15x ideal {v['P7']}; {p7['ratio_vs_bare']:.2f}x bare, itself "
            f"{p7['bare_ratio_vs_ideal']:.2f}x ideal; ends s: "
            + ", ".join(f"{k} {t:.2f}" for k, t in p7["phase_ends_s"].items()),
        ),
    ]


def _table(report: dict[str, Any]) -> list[str]:
    p1, p3, p5, p6 = (report["results"][k] for k in ("P1", "P3", "P5", "P6"))
    v = {k: "met" if ok else "-" if ok is None else "MISSED" for k, ok in report["verdict"].items()}
    m = report["machine"]
    rows = [
        f"{m['cpus']} CPUs, Python {m['python']}, load average {m['load_avg_1m_before']} before, "
        f"{m['load_avg_1m_after']} after; median of {report['repeats']} run(s)"
        + (
            ""
            if p1 is None
            else f"; fake CPU/request {report['fake_cpu_us_per_request']:.0f} µs (its own process)"
        ),
        _row("figure", "evald", "reference", "ratio", "target"),
    ]
    if p1 is not None:
        rows += _p1_rows(p1, v)
    if p5 is not None:
        rows += [
            _row(
                "P5 first result / last inference s",
                f"{p5['first_result_s']:.2f}",
                f"{p5['last_inference_end_s']:.2f}",
                "",
                f"first result before the last inference ends {v['P5']}",
            ),
            _row(
                "P5 run end / score-after-all s",
                f"{p5['end_s']:.2f}",
                f"{p5['serial_end_s']:.2f}",
                "",
                f"saved {p5['saved_s']:.2f} s",
            ),
        ]
    for name, figure, target in (("P3", p3, 120), ("P6", p6, 250)):
        if figure is None:
            continue
        rows.append(
            _row(
                f"{name} server peak RSS MB, N={figure['n']}",
                f"{figure['peak_rss_mb']:.1f}",
                f"{target}",
                "",
                f"<= {target} MB {v[name]} (run {figure['wall_s']:.0f} s; by phase "
                + ", ".join(
                    f"{phase} {mb:.0f}"
                    for phase, mb in sorted(
                        figure["peak_rss_mb_by_phase"].items(), key=lambda x: x[1]
                    )
                )
                + f"; upload {figure['upload_peak_rss_mb']:.0f}; scoring workers "
                f"{figure['workers_peak_rss_mb']:.0f} MB)",
            )
        )
        rows.append(
            _row(
                f"{name} CreateRun answer s, N={figure['n']}",
                f"{figure['create_run_s']:.2f}",
                "2",
                "",
                "<= 2 s"
                + (f" {v['P3_create_run']}" if name == "P3" else "")
                + "; seconds by phase "
                + ", ".join(f"{k} {s:.1f}" for k, s in _phases_s(figure).items()),
            )
        )
    breakdown = None if p1 is None else p1.get("server_cpu_breakdown")
    if breakdown:
        jobs = {k: v for k, v in breakdown["samples"].items() if not k.startswith("thread: ")}
        busy = sum(v for k, v in jobs.items() if k != _stacks.IDLE)
        rows.append(
            f"P1 server CPU per subtask by job, µs (py-spy: {busy} busy samples, "
            f"{breakdown['samples'].get(_stacks.IDLE, 0)} idle left out):"
        )
        rows.extend(f"  {name:<36} {us:7.1f}" for name, us in breakdown["us_per_subtask"].items())
        threads = {k[8:]: v for k, v in breakdown["samples"].items() if k.startswith("thread: ")}
        rows.append("  samples by thread: " + ", ".join(f"{k} {v}" for k, v in threads.items()))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_e2e")
    parser.add_argument("--quick", action="store_true", help="one run of each figure")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument(
        "--peer-n",
        type=int,
        help="pydantic-evals cases per run (default: N; with --quick 2,500, extrapolated)",
    )
    parser.add_argument("--p3-n", type=int, default=100_000)
    parser.add_argument("--p5-records", type=int, default=2_500)
    parser.add_argument(
        "--large-records", type=int, default=100_000, help="P6: records of its dataset"
    )
    parser.add_argument(
        "--large-repeat",
        type=int,
        default=10,
        help="P6: repeats of each record (N = records × repeat)",
    )
    parser.add_argument(
        "--figures",
        type=lambda text: {f.strip().upper() for f in text.split(",")},
        default={"P1", "P3", "P4", "P5"},
        help="which figures, e.g. P1,P5 (P4 comes with P1: it is measured on P1's runs); "
        "P6, the 1,000,000-subtask run, only when named",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--profile-server", type=Path, metavar="DIR", help="run the servers under cProfile"
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        metavar="DIR",
        help="sample the server with py-spy during the P1 runs; report where its CPU goes",
    )
    args = parser.parse_args(argv)
    if args.py_spy is not None:
        global SAMPLE_DIR
        SAMPLE_DIR = args.py_spy.resolve()
        SAMPLE_DIR.mkdir(parents=True, exist_ok=True)
    if args.profile_server is not None:
        global PROFILE_DIR
        PROFILE_DIR = args.profile_server.resolve()
        PROFILE_DIR.mkdir(parents=True, exist_ok=True)
    if args.quick:
        args.repeats = 1
    if args.peer_n is None:
        args.peer_n = min(args.n, 2_500) if args.quick else args.n
    report = anyio.run(_main, args, backend="asyncio")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print("\n".join(_table(report)))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
