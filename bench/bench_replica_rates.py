"""Rate control across replicas: in-process engines on one PostgreSQL database against
one fake provider (its journal is the ground truth for every replica's calls).

    python -m bench.bench_replica_rates [--quick] [--dsn URL]

* X1: a model with a quota of R requests a minute (the fake's bucket, one second deep)
  and 3 concurrent runs on it, worked by n replicas that each declare the model's
  ``requests_per_minute`` (the balancing shares R between them by demand): the share
  of calls answered 429 and the sustained throughput as a share of R, for n = 1
  (reference), 2 and 3. Targets: 429 share ≤ 2 %, throughput ≥ 90 % of R.
* X2: AIMD per replica, no declared budget, against a hidden capacity of C calls in
  flight (429 above it): the combined effective concurrency of n replicas (Σ answered
  call time / wall, from the journal), the 429 share after convergence and the time to
  converge, measured as bench_rate_control's A1 measures one process. The model's
  ``max_concurrency`` is 4 C, shared (each replica's AIMD moves within 4 C / n). Also
  the model's concurrency as a replica's statistics show it summed over the replicas
  (``replicas_concurrency``, published at the balancing). Targets: effective
  concurrency in [0.7 C, C], 429 share ≤ 5 %.
* X3: a run budget (``max_cost_usd``) on a run worked by 2 replicas: what was spent,
  and the answers beyond those needed to reach the budget, against the bound: one
  balancing period of the other replica's answers plus the calls in flight on both.

Prints a table and writes ``bench/results/replica_rates.json``.
"""

import argparse
import os
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from bench.bench_rate_control import (
    PRICE,
    RETRIES,
    _jsonl,
    _share_429,
    _usd,
    _verdict,
    aimd_analysis,
    publish,
)
from bench.bench_replicas import DEFAULT_DSN, _admin, _fresh_db
from evald_server.app import DatasetHeader, DatasetRef, Evald, RunSpec
from evald_server.config import parse_config
from evald_server.domain import TaskType
from evald_server.engine import RunBudget
from evald_server.engine._shares import BALANCE_EVERY_S
from evald_server.fake_provider import FakeConfig, FakeProvider, Quota

RESULTS = Path(__file__).parent / "results" / "replica_rates.json"
TENANT = "bench"


@asynccontextmanager
async def _replicas(
    dsn: str,
    fake: FakeProvider,
    n: int,
    model: dict[str, Any],
    records: int,
    max_inflight: Sequence[int] = (),
    base_urls: Sequence[str] = (),
) -> AsyncIterator[list[Evald]]:
    """``n`` replicas on a fresh database, a dataset of ``records`` uploaded; the i-th
    replica's ``max_inflight`` is ``max_inflight[i]`` where given (512 otherwise), and
    it calls the model at ``base_urls[i]`` where given (``fake`` otherwise)."""
    name, url = await _fresh_db(dsn)
    try:
        async with AsyncExitStack() as stack:
            apps = []
            for i in range(n):
                config = parse_config(
                    {
                        "store": {"url": url, "replica_id": f"x{i}", "pool_size": 4},
                        "limits": {
                            "max_inflight": max_inflight[i] if i < len(max_inflight) else 512,
                            "max_subtasks_per_run": 100_000,
                        },
                        "models": [
                            {
                                "id": "m1",
                                "provider": "openai",
                                "base_url": base_urls[i] if i < len(base_urls) else fake.base_url,
                                **model,
                            }
                        ],
                    }
                )
                apps.append(await stack.enter_async_context(Evald.open(config)))
            header = DatasetHeader("ds", "1.0.0", TaskType.CLASSIFICATION)
            await apps[0].datasets.upload(TENANT, header, [_jsonl(records)])
            await anyio.sleep(2 * BALANCE_EVERY_S)  # every replica has balanced with all
            fake.reset()
            yield apps
    finally:
        await _admin(dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _work(
    apps: list[Evald], runs: int, *, budget: RunBudget | None = None
) -> tuple[float, list[Any], list[tuple[float, int, bool, int]]]:
    """``runs`` runs, the i-th created on replica i mod n, watched to their end; (start,
    the runs as they ended, samples of (time, Σ the replicas' model limit, slow start
    on any, the combined concurrency replica 0's statistics show))."""
    spec = RunSpec(
        models=("m1",),
        datasets=(DatasetRef("ds", "1.0.0"),),
        retry_policy=RETRIES,
        budget=budget or RunBudget(),
    )
    started = time.time()
    created = [
        (apps[i % len(apps)], await apps[i % len(apps)].runs.create(TENANT, spec))
        for i in range(runs)
    ]
    samples: list[tuple[float, int, bool, int]] = []

    async def sample() -> None:
        while True:
            stats = [app.engine.rate_stats()[0] for app in apps]
            total = sum(s.concurrency for s in stats)
            samples.append(
                (
                    time.time(),
                    total,
                    any(s.slow_start for s in stats),
                    stats[0].replicas_concurrency,
                )
            )
            await anyio.sleep(0.02)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        for app, run in created:
            async for _ in await app.runs.watch(TENANT, run.run_id, 0):
                pass
        tg.cancel_scope.cancel()
    ended = [await app.runs.get(TENANT, run.run_id) for app, run in created]
    return started, ended, samples


async def quota_figure(dsn: str, n: int, rpm: float, per_run: int) -> dict[str, Any]:
    quota = Quota(requests_per_minute=rpm, burst_s=1.0)
    model = {"max_concurrency": 32, "requests_per_minute": rpm, "budget_burst_s": 1.0}
    async with FakeProvider(FakeConfig(quotas={"*": quota}, latency_ms=20)) as fake:
        async with _replicas(dsn, fake, n, model, per_run) as apps:
            await _work(apps, 3)
            shares = [app.engine.rate_stats()[0].requests_share for app in apps]
        entries = list(fake.journal.entries)
    ok = [e for e in entries if e.outcome == "ok"]
    first = min(e.started_at for e in entries)
    last = max(e.finished_at or 0.0 for e in entries)
    per_minute = len(ok) / (last - first) * 60.0
    return {
        "replicas": n,
        "rpm": rpm,
        "runs": 3,
        "calls": len(entries),
        "answers": len(ok),
        "share_429": _share_429(entries),
        "throughput_per_minute": per_minute,
        "throughput_share_of_r": per_minute / rpm,
        "final_shares_per_minute": shares,
        "wall_s": last - first,
    }


async def aimd_figure(dsn: str, n: int, capacity: int, records: int) -> dict[str, Any]:
    model = {
        "max_concurrency": 4 * capacity,
        "adaptive_concurrency": {"enabled": True, "min": 1, "start": 1},
    }
    async with FakeProvider(FakeConfig(max_concurrent=capacity, latency_ms=50)) as fake:
        async with _replicas(dsn, fake, n, model, records) as apps:
            started, _, samples = await _work(apps, 1)
            episodes = [app.engine.rate_stats()[0].episodes for app in apps]
            seen = apps[0].engine.rate_stats()[0].replicas_episodes
        entries = list(fake.journal.entries)
    ended = max(e.finished_at or 0.0 for e in entries)
    figure = aimd_analysis(capacity, entries, [s[:3] for s in samples], started, ended)
    converged = started + figure["time_to_converge_s"]
    answers = sorted(e.finished_at for e in entries if e.outcome == "ok" and e.finished_at)
    steady_end = answers[int(0.9 * len(answers)) - 1]
    shown = [s[3] for s in samples if converged <= s[0] <= steady_end]
    return figure | {
        "replicas": n,
        "episodes_per_replica": episodes,
        "episodes_shown_summed": seen,
        "shown_concurrency_mean": sum(shown) / len(shown) if shown else 0.0,
    }


async def budget_figure(dsn: str, records: int, in_flight: int) -> dict[str, Any]:
    budget = 0.05  # USD: some 200 answers at PRICE (the fake's usage per answer)
    model = {"max_concurrency": in_flight, "price": PRICE}
    async with FakeProvider(FakeConfig(latency_ms=50)) as fake:
        async with _replicas(dsn, fake, 2, model, records) as apps:
            _, (run,), _ = await _work(apps, 1, budget=RunBudget(max_cost_usd=budget))
        entries = list(fake.journal.entries)
    answered = sorted((e for e in entries if e.outcome == "ok"), key=lambda e: e.finished_at or 0)
    spent, needed = 0.0, 0
    for entry in answered:
        spent += _usd(entry.prompt_tokens or 0, entry.completion_tokens or 0)
        needed += 1
        if spent >= budget:
            break
    # The bound: a balancing period (plus a commit's delay) of the other replica's
    # answers, at the pace both had, and the calls in flight on both.
    first = min(e.started_at for e in answered)
    last = max(e.finished_at or 0.0 for e in answered)
    per_replica_per_s = len(answered) / (last - first) / 2
    bound = per_replica_per_s * (BALANCE_EVERY_S + 0.1) + in_flight
    return {
        "records": records,
        "in_flight": in_flight,
        "budget_usd": budget,
        "spent_usd": run.progress.cost.cost_usd,
        "overshoot_usd": run.progress.cost.cost_usd - budget,
        "answers": len(answered),
        "answers_needed": needed,
        "answers_beyond": len(answered) - needed,
        "answers_per_s_per_replica": per_replica_per_s,
        "bound_answers_beyond": bound,
        "state": run.state.value,
        "cancel_reason": run.cancel_reason,
    }


async def main(dsn: str, quick: bool) -> dict[str, Any]:
    rpm = 1200.0
    per_run = 100 if quick else 200
    x1 = [await quota_figure(dsn, n, rpm, per_run) for n in (1, 2, 3)]
    records = 1000 if quick else 2500
    x2 = [await aimd_figure(dsn, n, c, records) for n in (2, 3) for c in (8, 16)]
    x3 = await budget_figure(dsn, 2000, 8)
    return {"x1": x1, "x2": x2, "x3": x3}


def _row(label: str, value: str, target: str = "(reported)") -> str:
    return f"{label:46} {value:>12}  {target}"  # labels longer than bench_rate_control's


def table(results: dict[str, Any]) -> str:
    rows = [_row("figure", "value", "target")]
    for q in results["x1"]:
        n, share, thr = q["replicas"], q["share_429"], q["throughput_share_of_r"]
        where = f"R={q['rpm']:g}/min, 3 runs, {n} replica{'s' if n > 1 else ''}"
        rows += [
            _row(f"X1 429 share ({where})", f"{share:.2%}", f"<= 2 % {_verdict(share <= 0.02)}"),
            _row(f"X1 throughput / R ({n})", f"{thr:.1%}", f">= 90 % {_verdict(thr >= 0.9)}"),
        ]
    for a in results["x2"]:
        n, c = a["replicas"], a["capacity_c"]
        eff, after = a["effective_concurrency_after"], a["share_429_after"]
        rows += [
            _row(f"X2 {n} replicas, C={c}: time to converge", f"{a['time_to_converge_s']:.2f} s"),
            _row(
                f"X2 {n} replicas, C={c}: combined concurrency",
                f"{eff:.2f}",
                f"in [{0.7 * c:g}, {c}] {_verdict(0.7 * c <= eff <= c)}",
            ),
            _row(
                f"X2 {n} replicas, C={c}: 429 share after",
                f"{after:.2%}",
                f"<= 5 % {_verdict(after <= 0.05)} ({a['share_429_overall']:.2%} overall)",
            ),
            _row(
                f"X2 {n} replicas, C={c}: Σ limits, mean (shown)",
                f"{a['limit_after_mean']:.1f}",
                f"statistics show {a['shown_concurrency_mean']:.1f}; "
                f"episodes {a['episodes_per_replica']} (shown {a['episodes_shown_summed']})",
            ),
        ]
    b = results["x3"]
    rows.append(
        _row(
            f"X3 budget {b['budget_usd']:g} USD, 2 replicas: spent",
            f"{b['spent_usd']:.6f}",
            f"{b['answers_beyond']} answers beyond the budget (<= "
            f"{b['bound_answers_beyond']:.0f} "
            f"{_verdict(b['answers_beyond'] <= b['bound_answers_beyond'])}), {b['state']}",
        )
    )
    return "\n".join(rows)


def run() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_replica_rates")
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--dsn", default=DEFAULT_DSN, help="the PostgreSQL server (admin db)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    results = anyio.run(main, args.dsn, args.quick)
    publish(results, RESULTS, table, load_before, os.getloadavg(), quick=args.quick)


if __name__ == "__main__":
    run()
