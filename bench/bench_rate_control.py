"""Rate control against the fake provider's quota mode, in process.

    python -m bench.bench_rate_control [--quick]

* Q1: a model with a quota of R requests a minute (the fake's token bucket, one second
  deep) and 3 concurrent runs on it: the share of calls answered 429 and the sustained
  throughput (answers a minute, first call to last answer) as a share of R, with the
  model's ``requests_per_minute`` budget on and off (off: only the provider's
  ``x-ratelimit-*`` headers slow evald down). Targets: 429 share ≤ 2 % with the budget
  on, throughput ≥ 90 % of R.
* Q2: throughput against R for a few R, budget on.
* A1: AIMD with no declared budget against a fake whose hidden capacity is C calls in
  flight (429 above it; 50 ms per answer). Effective concurrency is Σ answered call
  time / wall, from the fake's journal, over 0.25 s windows; the controller has
  converged at the first window reaching 0.7 C. From then to the steady state's end
  (90 % of the answers in; the tail, where work runs out, is left out): the effective
  concurrency, the 429 share and the model limit's value (sampled every 20 ms).
  Targets: effective concurrency in [0.7 C, C], 429 share ≤ 5 %; the time to converge
  is reported.
* C1: cost. A priced model against the fake's quota (so some calls are answered 429
  and cost nothing): the run's cost as evald reports it (GetRun's progress) against
  Σ usage × price over the fake's journal. Target: equal (exactly: money is counted in
  integer pico-USD).
* B1: a run budget (``max_cost_usd``) with 8 calls in flight: what was spent against
  the budget, and the answers beyond those needed to reach it (at most the calls in
  flight).

Everything runs in this process (a real SQLite file, the real OpenAI provider over
loopback, the fake's journal as the ground truth). Prints a table and writes
``bench/results/rate_control.json``.
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from evald_server.app import DatasetHeader, DatasetRef, Evald, RetryPolicy, RunSpec
from evald_server.config import parse_config
from evald_server.domain import TaskType
from evald_server.engine import MODEL_LIMIT, RunBudget
from evald_server.fake_provider import FakeConfig, FakeProvider, JournalEntry, Quota

RESULTS = Path(__file__).parent / "results" / "rate_control.json"
TENANT = "bench"
# Generous retries: a rate-limited call is retried until it gets through.
_WINDOW_S = 0.25  # effective concurrency is measured over windows this long
RETRIES = RetryPolicy(max_retries=100, backoff_s=(0.1,), jitter=0.5, retry_after_cap_s=2.0)


def _jsonl(records: int) -> bytes:
    lines = (
        json.dumps(
            {"id": f"r{i}", "input": f"review {i}", "label": "pos", "choices": ["pos", "neg"]}
        )
        for i in range(records)
    )
    return ("\n".join(lines) + "\n").encode()


PRICE = {"input_per_million": 2.5, "output_per_million": 10.0}


async def _measure(
    fake: FakeProvider,
    db: Path,
    model: dict[str, Any],
    runs: int,
    records: int,
    *,
    budget: RunBudget | None = None,
    finished: list[Any] | None = None,
) -> tuple[float, float, list[tuple[float, int, bool]]]:
    """Run ``runs`` runs of ``records`` each at once; (start, end, samples of the model
    limit's capacity and whether AIMD is still in slow start).
    ``finished`` receives each run as it ended."""
    config = parse_config(
        {
            "store": {"url": f"sqlite:///{db}"},
            "limits": {"max_inflight": 512},
            "models": [{"id": "m1", "provider": "openai", "base_url": fake.base_url, **model}],
        }
    )
    samples: list[tuple[float, int, bool]] = []
    async with Evald.open(config) as app:
        header = DatasetHeader(
            name="ds", benchmark_version="1.0.0", task_type=TaskType.CLASSIFICATION
        )
        await app.datasets.upload(TENANT, header, [_jsonl(records)])
        fake.reset()
        spec = RunSpec(
            models=("m1",),
            datasets=(DatasetRef("ds", "1.0.0"),),
            retry_policy=RETRIES,
            budget=budget or RunBudget(),
        )
        started = time.time()
        created = [await app.runs.create(TENANT, spec) for _ in range(runs)]

        async def sample() -> None:
            while True:
                (limit,) = [s for s in app.engine.limiter_stats() if s.name == MODEL_LIMIT]
                (rate,) = app.engine.rate_stats()
                samples.append((time.time(), limit.capacity, rate.slow_start))
                await anyio.sleep(0.02)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            for run in created:
                async for _ in await app.runs.watch(TENANT, run.run_id, 0):
                    pass
            tg.cancel_scope.cancel()
        if finished is not None:
            finished.extend([await app.runs.get(TENANT, run.run_id) for run in created])
        ended = max(e.finished_at or 0.0 for e in fake.journal.entries)
    return started, ended, samples


def _share_429(entries: list[JournalEntry]) -> float:
    return sum(1 for e in entries if e.status == 429) / len(entries) if entries else 0.0


async def quota_figure(rpm: float, runs: int, records: int, *, budget: bool) -> dict[str, Any]:
    quota = Quota(requests_per_minute=rpm, burst_s=1.0)
    model: dict[str, Any] = {"max_concurrency": 32}
    if budget:
        model |= {"requests_per_minute": rpm, "budget_burst_s": 1.0}
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeProvider(FakeConfig(quotas={"*": quota}, latency_ms=20)) as fake:
            started, ended, _ = await _measure(fake, Path(tmp) / "e.db", model, runs, records)
            entries = list(fake.journal.entries)
    ok = sum(1 for e in entries if e.outcome == "ok")
    first = min(e.started_at for e in entries)
    per_minute = ok / (ended - first) * 60.0
    return {
        "rpm": rpm,
        "runs": runs,
        "calls": len(entries),
        "answers": ok,
        "share_429": _share_429(entries),
        "throughput_per_minute": per_minute,
        "throughput_share_of_r": per_minute / rpm,
        "wall_s": ended - started,
        "budget": budget,
    }


def _effective_concurrency(entries: list[JournalEntry], start: float, end: float) -> float:
    busy = 0.0
    for e in entries:
        if e.outcome != "ok" or e.finished_at is None:
            continue
        busy += max(0.0, min(e.finished_at, end) - max(e.started_at, start))
    return busy / (end - start) if end > start else 0.0


async def aimd_figure(capacity: int, records: int, **adaptive: Any) -> dict[str, Any]:
    model: dict[str, Any] = {
        "max_concurrency": 4 * capacity,
        "adaptive_concurrency": {"enabled": True, "min": 1, "start": 1, **adaptive},
    }
    config = FakeConfig(max_concurrent=capacity, latency_ms=50)
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeProvider(config) as fake:
            started, ended, samples = await _measure(fake, Path(tmp) / "e.db", model, 1, records)
            entries = list(fake.journal.entries)
    return aimd_analysis(capacity, entries, samples, started, ended)


def aimd_analysis(
    capacity: int,
    entries: list[JournalEntry],
    samples: list[tuple[float, int, bool]],
    started: float,
    ended: float,
) -> dict[str, Any]:
    """AIMD's figures from the fake's journal and the sampled limit (see A1)."""
    answers = sorted(e.finished_at for e in entries if e.outcome == "ok" and e.finished_at)
    # The steady state ends when 90 % of the answers are in: the tail, where work runs
    # out, says nothing about the controller.
    steady_end = answers[int(0.9 * len(answers)) - 1]
    converged_at = steady_end
    at = started
    while at + _WINDOW_S <= steady_end:
        if _effective_concurrency(entries, at, at + _WINDOW_S) >= 0.7 * capacity:
            converged_at = at
            break
        at += _WINDOW_S
    after = [e for e in entries if converged_at <= e.started_at <= steady_end]
    values_after = [v for at, v, _ in samples if converged_at <= at <= steady_end]
    # Slow start doubles the value per round of calls until the first episode: its
    # overshoot is part of converging. After it, the value should stay near C + 1.
    slow_start_end = min((at for at, _, slow in samples if not slow), default=steady_end)
    after_slow_start = [v for at, v, _ in samples if slow_start_end <= at <= steady_end]
    windows = []
    at = converged_at
    while at + _WINDOW_S <= steady_end:
        windows.append(_effective_concurrency(entries, at, at + _WINDOW_S))
        at += _WINDOW_S
    return {
        "capacity_c": capacity,
        "calls": len(entries),
        "share_429_overall": _share_429(entries),
        "time_to_converge_s": converged_at - started,
        "share_429_after": _share_429(after),
        "effective_concurrency_after": _effective_concurrency(entries, converged_at, steady_end),
        "effective_concurrency_windows_min": min(windows, default=0.0),
        "effective_concurrency_windows_max": max(windows, default=0.0),
        "limit_after_min": min(values_after, default=0),
        "limit_after_max": max(values_after, default=0),
        "limit_after_mean": sum(values_after) / len(values_after) if values_after else 0.0,
        "slow_start_end_s": slow_start_end - started,
        "limit_after_slow_start_max": max(after_slow_start, default=0),
        "steady_s": steady_end - converged_at,
        "wall_s": ended - started,
    }


def _usd(prompt: int, completion: int) -> float:
    return (prompt * PRICE["input_per_million"] + completion * PRICE["output_per_million"]) / 1e6


def _bill(entries: list[JournalEntry]) -> tuple[float, int, int]:
    """Σ usage × PRICE over the fake's answers: (USD, tokens, answers)."""
    answered = [e for e in entries if e.outcome == "ok"]
    prompt = sum(e.prompt_tokens or 0 for e in answered)
    completion = sum(e.completion_tokens or 0 for e in answered)
    return _usd(prompt, completion), prompt + completion, len(answered)


async def cost_figure(records: int) -> dict[str, Any]:
    quota = Quota(requests_per_minute=3000, burst_s=0.5)
    model = {"max_concurrency": 16, "price": PRICE}
    runs: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeProvider(FakeConfig(quotas={"*": quota}, latency_ms=10)) as fake:
            await _measure(fake, Path(tmp) / "e.db", model, 1, records, finished=runs)
            entries = list(fake.journal.entries)
    usd, tokens, answers = _bill(entries)
    (run,) = runs
    return {
        "calls": len(entries),
        "answers": answers,
        "share_429": _share_429(entries),
        "evald_cost_usd": run.progress.cost.cost_usd,
        "journal_cost_usd": usd,
        "evald_tokens": run.progress.cost.tokens,
        "journal_tokens": tokens,
        "estimated": run.progress.cost.estimated,
        "equal": run.progress.cost.cost_usd == usd and run.progress.cost.tokens == tokens,
    }


async def budget_figure(records: int, in_flight: int) -> dict[str, Any]:
    budget = 0.0075  # USD: some 10 % of the run at this price (30 answers of 300)
    model = {"max_concurrency": in_flight, "price": PRICE}
    runs: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with FakeProvider(FakeConfig(latency_ms=20)) as fake:
            await _measure(
                fake,
                Path(tmp) / "e.db",
                model,
                1,
                records,
                budget=RunBudget(max_cost_usd=budget),
                finished=runs,
            )
            entries = list(fake.journal.entries)
    answered = sorted((e for e in entries if e.outcome == "ok"), key=lambda e: e.finished_at or 0)
    spent, needed = 0.0, 0
    for entry in answered:
        prompt, completion = entry.prompt_tokens or 0, entry.completion_tokens or 0
        spent += (
            prompt * PRICE["input_per_million"] + completion * PRICE["output_per_million"]
        ) / 1e6
        needed += 1
        if spent >= budget:
            break
    (run,) = runs
    return {
        "records": records,
        "in_flight": in_flight,
        "budget_usd": budget,
        "spent_usd": run.progress.cost.cost_usd,
        "overshoot_usd": run.progress.cost.cost_usd - budget,
        "answers": len(answered),
        "answers_needed": needed,
        "answers_beyond": len(answered) - needed,
        "state": run.state.value,
        "cancel_reason": run.cancel_reason,
    }


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


async def main(quick: bool) -> dict[str, Any]:
    rpm = 1200.0
    per_run = 100 if quick else 200
    q1_on = await quota_figure(rpm, 3, per_run, budget=True)
    q1_off = await quota_figure(rpm, 3, per_run, budget=False)
    q2 = [
        await quota_figure(r, 3, max(20, int(r / 60 * (8 if quick else 15) / 3)), budget=True)
        for r in (600.0, 1200.0, 2400.0)
    ]
    a1 = [await aimd_figure(c, 1000 if quick else 2500) for c in (8, 16)]
    c1 = await cost_figure(200 if quick else 500)
    b1 = await budget_figure(300, 8)
    return {"q1_budget_on": q1_on, "q1_budget_off": q1_off, "q2": q2, "a1": a1, "c1": c1, "b1": b1}


def _row(label: str, value: str, target: str = "(reported)") -> str:
    return f"{label:44} {value:>12}  {target}"


def table(results: dict[str, Any]) -> str:
    on, off = results["q1_budget_on"], results["q1_budget_off"]
    r = f"R={on['rpm']:g}/min, 3 runs"
    share_on, thr_on = on["share_429"], on["throughput_share_of_r"]
    rows = [
        _row("figure", "value", "target"),
        _row(
            f"Q1 429 share, budget on ({r})",
            f"{share_on:.2%}",
            f"<= 2 % {_verdict(share_on <= 0.02)}",
        ),
        _row("Q1 throughput / R, budget on", f"{thr_on:.1%}", f">= 90 % {_verdict(thr_on >= 0.9)}"),
        _row("Q1 429 share, budget off (headers only)", f"{off['share_429']:.2%}"),
        _row("Q1 throughput / R, budget off", f"{off['throughput_share_of_r']:.1%}"),
    ]
    for q in results["q2"]:
        rows.append(
            _row(
                f"Q2 R={q['rpm']:g}/min: throughput / R",
                f"{q['throughput_share_of_r']:.1%}",
                f"429 share {q['share_429']:.2%} of {q['calls']} calls",
            )
        )
    for a in results["a1"]:
        c = a["capacity_c"]
        eff = a["effective_concurrency_after"]
        after = a["share_429_after"]
        rows += [
            _row(f"A1 C={c}: time to converge", f"{a['time_to_converge_s']:.2f} s"),
            _row(
                f"A1 C={c}: effective concurrency after",
                f"{eff:.2f}",
                f"in [{0.7 * c:g}, {c}] {_verdict(0.7 * c <= eff <= c)}",
            ),
            _row(
                f"A1 C={c}: 429 share after (overall)",
                f"{after:.2%}",
                f"<= 5 % {_verdict(after <= 0.05)} ({a['share_429_overall']:.2%} overall)",
            ),
            _row(
                f"A1 C={c}: limit after min/mean/max",
                f"{a['limit_after_min']}/{a['limit_after_mean']:.1f}/{a['limit_after_max']}",
            ),
            _row(
                f"A1 C={c}: limit max once slow start ended",
                f"{a['limit_after_slow_start_max']}",
                f"<= C + 1 {_verdict(a['limit_after_slow_start_max'] <= c + 1)} "
                f"(slow start ended at {a['slow_start_end_s']:.2f} s)",
            ),
        ]
    c1, b1 = results["c1"], results["b1"]
    rows += [
        _row(
            "C1 run cost: evald vs journal Σ usage × price",
            f"{c1['evald_cost_usd']:.6f}",
            f"= {c1['journal_cost_usd']:.6f} {_verdict(c1['equal'])} "
            f"({c1['answers']} answers, {c1['share_429']:.1%} 429)",
        ),
        _row(
            f"B1 budget {b1['budget_usd']:g} USD, {b1['in_flight']} in flight: spent",
            f"{b1['spent_usd']:.6f}",
            f"{b1['answers_beyond']} answers beyond the budget "
            f"(<= {b1['in_flight']} {_verdict(b1['answers_beyond'] <= b1['in_flight'])}), "
            f"{b1['state']}",
        ),
    ]
    return "\n".join(rows)


def run() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_rate_control")
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results = anyio.run(main, args.quick)
    publish(results, RESULTS, table, load_before, os.getloadavg()[0], quick=args.quick)


def publish(
    results: dict[str, Any],
    path: Path,
    render: Callable[[dict[str, Any]], str],
    load_before: object,
    load_after: object,
    *,
    quick: bool,
) -> None:
    """Add the machine's description, write ``results`` to ``path``, print the table."""
    results["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": load_before,
        "load_after": load_after,
        "quick": quick,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(render(results))
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    run()
