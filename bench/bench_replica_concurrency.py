"""A model's ``max_concurrency`` across replicas: what n replicas on one PostgreSQL
database achieve of a limit C that the balancing splits 1/n between them, in the
shapes that the claiming gives work (in-process engines, one fake provider whose
journal holds every replica's calls).

    python -m bench.bench_replica_concurrency [--dsn URL]

Every replica hears of every run's ready work through the change feed and claims from
the run's shared pending subtasks up to twice its share (a lane's water marks follow
its share), so work lands on the replicas in proportion to their shares. The shapes:

* K1: one run of 400 records created on replica 0, worked by n = 1 (reference), 2, 3.
* K2: runs of 24 records created one after another on replica 0 (3 of them), each a
  fraction of a balancing period long: per run, n = 1, 2, 3.
* K3: 2 replicas, replica 1's ``max_inflight`` (2) below its share (C / 2): it cannot
  use its share, and the share of the limit it does not use is idle.

Each replica calls its own fake (the journals tell which replica made each call; their
union is what the provider saw). Per shape: the most calls in flight at once (never above C), the
effective concurrency (Σ call time / wall, first call to last answer) as a share of C,
and the throughput as a share of the ideal C / latency. Writes
``bench/results/replica_concurrency.json``.
"""

import argparse
import os
from contextlib import AsyncExitStack
from typing import Any

import anyio

from bench.bench_rate_control import _verdict, publish
from bench.bench_replica_rates import RESULTS, _replicas, _work
from bench.bench_replicas import DEFAULT_DSN
from evald_server.fake_provider import FakeConfig, FakeProvider, JournalEntry

RESULTS_PATH = RESULTS.with_name("replica_concurrency.json")
C = 8
LATENCY_S = 0.05


def concurrency(entries: list[JournalEntry]) -> dict[str, Any]:
    """The fake's peak calls in flight, effective concurrency and throughput."""
    ends = [e.finished_at or e.started_at for e in entries]
    edges = sorted([(e.started_at, 1) for e in entries] + [(end, -1) for end in ends])
    in_flight = peak = 0
    for _, step in edges:
        in_flight += step
        peak = max(peak, in_flight)
    first = min(e.started_at for e in entries)
    wall = max(e.finished_at or 0.0 for e in entries) - first
    busy = sum(end - e.started_at for e, end in zip(entries, ends, strict=True))
    return {
        "calls": len(entries),
        "peak_in_flight": peak,
        "effective_concurrency": busy / wall,
        "effective_share_of_c": busy / wall / C,
        "throughput_share_of_ideal": len(entries) / wall / (C / LATENCY_S),
        "wall_s": wall,
    }


async def shape(
    dsn: str, n: int, records: int, runs: int, max_inflight: tuple[int, ...] = ()
) -> dict[str, Any]:
    """``runs`` runs of ``records`` one after another, each created on replica 0."""
    per_run = []
    model = {"max_concurrency": C}
    async with AsyncExitStack() as stack:
        # One fake per replica: its journal tells which replica made each call.
        config = FakeConfig(latency_ms=LATENCY_S * 1000)
        fakes = [await stack.enter_async_context(FakeProvider(config)) for _ in range(n)]
        urls = [fake.base_url for fake in fakes]
        apps = await stack.enter_async_context(
            _replicas(dsn, fakes[0], n, model, records, max_inflight, urls)
        )
        for _ in range(runs):
            for fake in fakes:
                fake.reset()
            await _work(apps[:1], 1)  # created on replica 0; every replica claims
            journals = [list(fake.journal.entries) for fake in fakes]
            figure = concurrency([e for journal in journals for e in journal])
            per_run.append(figure | {"calls_per_replica": [len(j) for j in journals]})
    mean = {
        key: sum(r[key] for r in per_run) / len(per_run)
        for key in ("effective_share_of_c", "throughput_share_of_ideal", "wall_s")
    }
    return {
        "replicas": n,
        "records": records,
        "runs": runs,
        "max_inflight": list(max_inflight),
        "peak_in_flight": max(r["peak_in_flight"] for r in per_run),
        "calls_per_replica": [r["calls_per_replica"] for r in per_run],
        "per_run": per_run,
    } | mean


async def main(dsn: str) -> dict[str, Any]:
    return {
        "c": C,
        "latency_s": LATENCY_S,
        "k1": [await shape(dsn, n, 400, 1) for n in (1, 2, 3)],
        "k2": [await shape(dsn, n, 24, 3) for n in (1, 2, 3)],
        "k3": await shape(dsn, 2, 400, 1, (512, 2)),
    }


def _row(label: str, value: str, target: str = "(reported)") -> str:
    return f"{label:46} {value:>12}  {target}"


def table(results: dict[str, Any]) -> str:
    c = results["c"]
    rows = [_row("figure", "value", "target")]
    shapes = [("K1 one run of 400", k) for k in results["k1"]]
    shapes += [("K2 runs of 24 (mean)", k) for k in results["k2"]]
    shapes.append(("K3 replica 1 max_inflight 2", results["k3"]))
    # The reference of each shape: one replica holding the whole limit (K3: K1's).
    reference = {"K1": results["k1"][0], "K2": results["k2"][0], "K3": results["k1"][0]}
    for label, k in shapes:
        ref = reference[label[:2]]["effective_share_of_c"]
        rows += [
            _row(
                f"{label}, {k['replicas']} replica(s): effective / C",
                f"{k['effective_share_of_c']:.1%}",
                f"1 replica {ref:.1%}; "
                f"throughput {k['throughput_share_of_ideal']:.1%} of C/latency",
            ),
            _row(
                f"{label}, {k['replicas']} replica(s): peak in flight",
                f"{k['peak_in_flight']}",
                f"<= C = {c} {_verdict(k['peak_in_flight'] <= c)}",
            ),
            _row(
                f"{label}, {k['replicas']} replica(s): calls by replica",
                "/".join(str(x) for x in k["calls_per_replica"][0]),
                "each run: " + ", ".join("/".join(map(str, r)) for r in k["calls_per_replica"]),
            ),
        ]
    return "\n".join(rows)


def run() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_replica_concurrency")
    parser.add_argument("--dsn", default=DEFAULT_DSN, help="the PostgreSQL server (admin db)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    results = anyio.run(main, args.dsn)
    publish(results, RESULTS_PATH, table, load_before, os.getloadavg(), quick=False)


if __name__ == "__main__":
    run()
