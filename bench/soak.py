"""The soak: evald under combinations for a long while, checked as it goes.

    python -m bench.soak                   # 25 minutes (the figure in bench/README.md)
    python -m bench.soak --minutes 2       # a short look

Three processes: the fake provider (latency ~20 ms log-normal, 8 % transient 503s, 3 %
permanent 400s), evald (a real SQLite file, the real scoring pool, three models: two
on the fake, one simulated with faults; a server-wide limit below the models' sum)
and this driver, which keeps up to ``--runs-in-flight`` runs going: random models and
datasets, run limits below and above the model limits, repeats, cancels mid-run,
RetryRun of the permanent failures. ``--watchers`` watchers join random runs, read a
while, leave and resume with their last seq on the raw stub (so that duplicates would
show). Not part of ``make test`` or ``make bench``.

Checked and reported (``bench/results/soak.json``):

* every run reaches a terminal state (stragglers are reported, not hidden);
* every watcher session is gap-free and duplicate-free;
* the moment a run's terminal event arrives, every succeeded sample has its scores;
* a run's counters equal a recount of its samples (ListSamples by state);
* server RSS and scoring-worker RSS sampled every 5 s, with their least-squares slope
  (MB per minute) over the whole soak and over its second half (after warm-up).
"""

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import grpc
import psutil

from bench._server_process import server_process
from evald.v1 import service_pb2, service_pb2_grpc
from evald_client import (
    AsyncEvaldClient,
    FailedPrecondition,
    RetryPolicy,
    StateChanged,
    SubtaskState,
)
from evald_server.fake_provider import FakeProcess

RESULTS = Path(__file__).parent / "results" / "soak.json"
MODELS = ("fake-a", "fake-b", "sim-c")
CAPS = {"fake-a": 6, "fake-b": 4, "sim-c": 3}
FAST_RETRIES = RetryPolicy(max_retries=2, backoff_s=(0.3, 1.0), jitter_fraction=0.5)


def _toml(db: Path, fake_url: str) -> str:
    return f"""[server]
listen = "127.0.0.1:0"
grace_s = 2.0
stall_warning_s = 20.0
[store]
url = "sqlite:///{db}"
[limits]
max_inflight = 10
max_runs_in_flight_per_tenant = 64
[[models]]
id = "fake-a"
provider = "openai"
base_url = "{fake_url}"
max_concurrency = {CAPS["fake-a"]}
timeout_s = 10.0
[[models]]
id = "fake-b"
provider = "openai"
base_url = "{fake_url}"
max_concurrency = {CAPS["fake-b"]}
timeout_s = 10.0
[[models]]
id = "sim-c"
provider = "simulated"
max_concurrency = {CAPS["sim-c"]}
simulator = {{ accuracy = 0.7, latency_ms_median = 15.0, latency_sigma = 0.4, fault_rate = 0.05 }}
"""


@asynccontextmanager
async def _server(where: Path, fake_url: str) -> AsyncIterator[tuple[str, psutil.Process]]:
    config = where / "evald.toml"
    config.write_text(_toml(where / "evald.sqlite3", fake_url))
    async with server_process(config, where / "server.stderr") as served:
        yield served


def _records(kind: str, n: int) -> list[dict[str, Any]]:
    if kind == "qa":
        return [
            {"id": f"q{i}", "question": f"What is item {i}?", "answers": [f"item {i}"]}
            for i in range(n)
        ]
    if kind == "generation":
        return [{"id": f"g{i}", "input": f"Repeat: {i}", "reference": f"{i}"} for i in range(n)]
    return [
        {"id": f"r{i}", "input": f"review {i}", "label": "pos" if i % 2 else "neg"}
        for i in range(n)
    ]


DATASETS = {"cls": ("classification", 40), "qa": ("qa", 30), "gen": ("generation", 25)}


@dataclass
class Soak:
    address: str
    server: psutil.Process
    rng: random.Random
    deadline: float
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)
    sessions: int = 0
    events: int = 0
    gaps: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    unscored_at_terminal: list[str] = field(default_factory=list)
    rss: list[tuple[float, float, float]] = field(default_factory=list)  # t, server, workers
    errors: Counter[str] = field(default_factory=Counter)


async def _driver(soak: Soak, client: AsyncEvaldClient, runs_in_flight: int) -> None:
    async with anyio.create_task_group() as tg:
        while time.monotonic() < soak.deadline:
            if len(soak.live) >= runs_in_flight:
                await anyio.sleep(0.2)
                continue
            tg.start_soon(_one_run, soak, client)
            await anyio.sleep(soak.rng.uniform(0.3, 2.5))


async def _one_run(soak: Soak, client: AsyncEvaldClient) -> None:
    rng = soak.rng
    models = sorted(rng.sample(MODELS, rng.randint(1, 3)))
    datasets = sorted(rng.sample(sorted(DATASETS), rng.randint(1, 2)))
    low, high = min(CAPS[m] for m in models), sum(CAPS[m] for m in models)
    limit = rng.choice((None, 1, 2, low, high - 1 or 1, high + 2))
    try:
        run = await client.create_run(
            models=models,
            datasets=[(d, "1.0.0") for d in datasets],
            max_concurrency=limit,
            repeat=rng.choice((1, 1, 2)),
            retry_policy=FAST_RETRIES,
        )
    except Exception as exc:  # a refused CreateRun is a finding
        soak.errors[f"create_run: {type(exc).__name__}: {exc}"] += 1
        return
    soak.runs[run.run_id] = {"models": models, "datasets": datasets, "limit": limit}
    soak.live.add(run.run_id)
    try:
        cancel = rng.random() < 0.15
        async with anyio.create_task_group() as tg:
            tg.start_soon(_finisher, soak, client, run.run_id, 0)
            if cancel:
                await anyio.sleep(rng.uniform(0.0, 3.0))
                answer = await client.cancel_run(run.run_id)
                soak.runs[run.run_id]["cancelled"] = answer.cancel_requested
                soak.runs[run.run_id]["cancel_answer"] = answer.state.value
        final = await client.get_run(run.run_id)
        retry = rng.random() < 0.5
        if retry and final.progress.counts.failed_permanent and not final.cancel_requested:
            try:
                outcome = await client.retry_run(run.run_id)
            except FailedPrecondition:
                pass
            else:
                soak.runs[run.run_id]["retried"] = outcome.requeued
                await _finisher(soak, client, run.run_id, outcome.run.last_seq)
    except Exception as exc:
        soak.errors[f"run {type(exc).__name__}: {exc}"] += 1
    finally:
        soak.live.discard(run.run_id)


async def _finisher(soak: Soak, client: AsyncEvaldClient, run_id: str, after: int) -> None:
    """Follow the run to its terminal event; at that moment every succeeded sample must
    have its scores."""
    with anyio.fail_after(900):
        async with aclosing(client.watch(run_id, after_seq=after)) as events:
            async for event in events:
                if isinstance(event, StateChanged) and event.is_terminal:
                    unscored = [
                        s.subtask_id
                        async for s in client.samples(
                            run_id, state=SubtaskState.SUCCEEDED, page_size=500
                        )
                        if not s.scores
                    ]
                    if unscored:
                        soak.unscored_at_terminal.append(f"{run_id}: {len(unscored)}")
                    soak.runs[run_id]["terminal"] = event.state.value


async def _watcher(soak: Soak, stub: Any, rng: random.Random) -> None:
    cursors: dict[str, int] = {}
    while time.monotonic() < soak.deadline:
        choices = sorted(soak.live) or sorted(soak.runs)
        if not choices:
            await anyio.sleep(0.5)
            continue
        run_id = rng.choice(choices)
        cursor = cursors.get(run_id, 0)
        soak.sessions += 1
        call = stub.WatchRun(service_pb2.WatchRunRequest(run_id=run_id, after_seq=cursor))
        with anyio.move_on_after(rng.uniform(0.3, 5.0)):
            try:
                async for response in call:
                    event = response.event
                    if event.WhichOneof("kind") == "heartbeat":
                        continue
                    soak.events += 1
                    if event.seq <= cursor:
                        soak.duplicates.append(f"{run_id}: {event.seq} after {cursor}")
                    elif event.seq != cursor + 1:
                        soak.gaps.append(f"{run_id}: {cursor} -> {event.seq}")
                    cursor = max(cursor, event.seq)
                    cursors[run_id] = cursor
            except grpc.aio.AioRpcError as exc:
                soak.errors[f"watch {exc.code().name}"] += 1
        call.cancel()
        await anyio.sleep(rng.uniform(0.0, 1.0))


async def _sample_rss(soak: Soak, started: float) -> None:
    while True:
        try:
            server = soak.server.memory_info().rss / 2**20
            workers = sum(c.memory_info().rss for c in soak.server.children(recursive=True))
        except psutil.Error:
            return
        soak.rss.append((time.monotonic() - started, server, workers / 2**20))
        await anyio.sleep(5.0)


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope in MB per minute."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    var = sum((p[0] - mx) ** 2 for p in points)
    if var == 0:
        return None
    return 60.0 * sum((p[0] - mx) * (p[1] - my) for p in points) / var


async def _recount(client: AsyncEvaldClient, run_id: str) -> str | None:
    run = await client.get_run(run_id)
    states = Counter([s.state async for s in client.samples(run_id, page_size=500)])
    c = run.progress.counts
    stored = {
        SubtaskState.SUCCEEDED: c.succeeded,
        SubtaskState.FAILED_PERMANENT: c.failed_permanent,
        SubtaskState.CANCELLED: c.cancelled,
        SubtaskState.PENDING: c.pending,
        SubtaskState.FAILED: c.retrying,
    }
    recount = {state: states.get(state, 0) for state in stored}
    running = states.get(SubtaskState.RUNNING, 0)
    if stored != recount or running != c.running + c.queued or sum(states.values()) != c.total:
        return f"{run_id}: counters {c} != recount {dict(states)}"
    return None


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="evald-soak-"))
    fake_args = ["--latency-ms", "20", "--latency-sigma", "0.5", "--seed", str(args.seed)]
    fake_args += ["--fault", "503=0.08", "--fault", "400=0.03"]
    started_wall = time.time()
    async with (
        FakeProcess(*fake_args, stderr=subprocess.DEVNULL) as fake,
        _server(tmp, fake.base_url + "/v1") as (address, server),
        AsyncEvaldClient(address) as client,
        grpc.aio.insecure_channel(address) as channel,
    ):
        stub = service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
        for name, (kind, n) in DATASETS.items():
            await client.upload_dataset(
                name=name, version="1.0.0", task_type=kind, records=_records(kind, n)
            )
        started = time.monotonic()
        soak = Soak(address, server, rng, started + 60.0 * args.minutes)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_sample_rss, soak, started)
            async with anyio.create_task_group() as work:
                work.start_soon(_driver, soak, client, args.runs_in_flight)
                for i in range(args.watchers):
                    work.start_soon(_watcher, soak, stub, random.Random(args.seed * 1000 + i))
            # The deadline passed: every run must still end by itself.
            with anyio.move_on_after(300):
                while soak.live:  # noqa: ASYNC110 (polled: runs end in the driver's tasks)
                    await anyio.sleep(1.0)
            tg.cancel_scope.cancel()
        stragglers = sorted(soak.live)
        not_terminal = []
        mismatches = []
        for run_id in sorted(soak.runs):
            run = await client.get_run(run_id)
            if not run.is_terminal:
                not_terminal.append(f"{run_id}: {run.state.value} {run.progress.counts}")
                continue
            problem = await _recount(client, run_id)
            if problem:
                mismatches.append(problem)
        log = (tmp / "server.stderr").read_text(errors="replace")
    points_server = [(t, s) for t, s, _ in soak.rss]
    points_workers = [(t, w) for t, _, w in soak.rss]
    half = soak.rss[len(soak.rss) // 2 :]
    states = Counter(r.get("terminal", "none") for r in soak.runs.values())
    return {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_wall)),
        "minutes": args.minutes,
        "runs": len(soak.runs),
        "final_states": dict(states),
        "cancelled": sum(1 for r in soak.runs.values() if r.get("cancelled")),
        "cancel_answers": dict(
            Counter(r["cancel_answer"] for r in soak.runs.values() if r.get("cancelled"))
        ),
        "retried": sum(1 for r in soak.runs.values() if r.get("retried")),
        "not_terminal": not_terminal,
        "stragglers_after_deadline": stragglers,
        "watch_sessions": soak.sessions,
        "watched_events": soak.events,
        "gaps": soak.gaps,
        "duplicates": soak.duplicates,
        "unscored_at_terminal": soak.unscored_at_terminal,
        "counter_mismatches": mismatches,
        "errors": dict(soak.errors),
        "stall_warnings": log.count(" stalled: "),
        "server_rss_mb": {
            "first": soak.rss[0][1] if soak.rss else None,
            "last": soak.rss[-1][1] if soak.rss else None,
            "max": max((s for _, s, _ in soak.rss), default=None),
            "slope_mb_per_min": _slope(points_server),
            "slope_second_half_mb_per_min": _slope([(t, s) for t, s, _ in half]),
        },
        "scoring_workers_rss_mb": {
            "first": soak.rss[0][2] if soak.rss else None,
            "last": soak.rss[-1][2] if soak.rss else None,
            "max": max((w for _, _, w in soak.rss), default=None),
            "slope_mb_per_min": _slope(points_workers),
            "slope_second_half_mb_per_min": _slope([(t, w) for t, _, w in half]),
        },
        "rss_samples": soak.rss,
        "store": str(tmp),
        "load_average": list(psutil.getloadavg()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak")
    parser.add_argument("--minutes", type=float, default=25.0)
    parser.add_argument("--runs-in-flight", type=int, default=6)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    report = anyio.run(main_async, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    summary = {k: v for k, v in report.items() if k != "rss_samples"}
    print(json.dumps(summary, indent=2))
    clean = not (
        report["not_terminal"]
        or report["gaps"]
        or report["duplicates"]
        or report["unscored_at_terminal"]
        or report["counter_mismatches"]
    )
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
