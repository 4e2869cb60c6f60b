"""A scoring worker's memory: what it imports and holds, started by the real pool.

    python -m bench.bench_worker_memory [--n 10000] [--whole-task-type qa]
        [--out bench/results/workers_memory.json]

One ``ScoringPool(1)`` (spawned workers, as in the server) in a child process of this
one, so that ``PYTHONPATH`` can point the measured code at another checkout's
``service/`` (the figures "before" a change). The child:

* starts the worker with a 100-sample classification task (the benchmarks' warm-up)
  and reads its ``/proc/PID/status`` (VmRSS) and ``smaps_rollup`` (Pss, anonymous);
* scores an ``--n``-sample classification task as the engine does in e2e P1: pages of
  2,000 samples one by one, then the aggregation of the pages and the last page
  (bootstrap included), and reads the worker's peak (VmHWM) after each step;
* scores the same task whole (``score``, the path of tasks scored from the store) on a
  fresh worker, and reads its peak;
* with ``--whole-task-type qa`` (or ``generation``, ``classification``), scores an
  ``--n``-sample task of that type on a fresh worker as the server scores one from the
  store: stored pages of 2,000 (records as JSON text, a SQuAD-sized context in each QA
  record, a 216-character review in each classification one) sent one by one from a
  ``SampleSource``, and reads the worker's peak (QA and generation are scored as they
  arrive, ``streams``; classification keeps each sample reduced by its ``compactor``).

The worker's modules come from a separate ``python -c`` that imports what a worker
imports (``tests/scoring/test_worker_imports.py`` guards the same list). Prints a table
and writes JSON.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

RESULTS = Path(__file__).parent / "results" / "workers_memory.json"
PAGE = 2000  # the engine's page of samples (engine._page_scoring.PAGE_SIZE)
HEAVY = ("numpy", "pydantic", "pydantic_core", "importlib.metadata", "re2", "anyio", "grpc")
_WORKER_IMPORTS = """
import json, sys
from evald_server.domain import TaskType
from evald_server.scoring._pool import _worker_main
from evald_server.scoring._registry import scorer_for
for task_type in TaskType:
    scorer_for(task_type)
print(json.dumps(sorted(sys.modules)))
"""


def _proc(pid: int) -> dict[str, float]:
    """VmRSS, VmHWM (peak RSS) and, from smaps_rollup, Pss and anonymous memory, in MB."""
    out: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        if key in ("Pss", "Anonymous"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


def _samples(lo: int, hi: int) -> list[Any]:
    from evald_server.scoring import ScoringSample

    return [
        ScoringSample(
            str(i),
            f"r{i}",
            0,
            {"id": f"r{i}", "input": f"review {i}", "label": "pos" if i % 2 else "neg"},
            "pos",
        )
        for i in range(lo, hi)
    ]


_LABELS = ("negative", "neutral", "positive")
_CONTEXT = (
    "The object was painted in {colour} by the workshop that made it, as the records of "
    "the museum show; later owners kept the colour, although the frame was replaced twice "
    "and the base once, after a flood in the storeroom where it was kept for a decade. "
) * 2


def _stored_record(task_type: str, i: int) -> dict[str, Any]:
    if task_type == "qa":
        return {
            "id": f"r{i}",
            "question": f"Which colour was object {i} painted in?",
            "context": _CONTEXT.format(colour=f"colour {i % 97}"),
            "answers": [f"colour {i % 97}"],
        }
    if task_type == "classification":
        review = f"Review {i}: the plot was slow but the acting held it together, mostly. " * 3
        return {"id": f"r{i}", "input": review, "label": _LABELS[i % 3]}
    return {"id": f"r{i}", "input": f"What is {i} + 1?", "reference": str(i + 1)}


def _stored_output(task_type: str, i: int) -> str:
    if task_type == "qa":
        return f"colour {i % 101}"
    if task_type == "classification":  # right, wrong, or (one in seven) no label
        return _LABELS[i % 5 % 3] if i % 7 else "not sure"
    return str(i + i % 2)


async def _stored_pages(task_type: str, n: int) -> Any:
    """The task's samples as the store's reader gives them, one page at a time."""
    from evald_server.scoring import EncodedPage, EncodedSample

    for lo in range(0, n, PAGE):
        yield EncodedPage(
            tuple(
                EncodedSample(
                    str(i),
                    f"r{i}",
                    0,
                    json.dumps(_stored_record(task_type, i)),
                    _stored_output(task_type, i),
                )
                for i in range(lo, min(n, lo + PAGE))
            )
        )


async def _started_worker(pool: Any) -> int:
    """Start the pool's one worker with the benchmarks' warm-up task; its pid."""
    from evald_server.domain import TaskType

    await pool.score(TaskType.CLASSIFICATION, _samples(0, 100), seed=0, timeout_s=120)
    (worker,) = pool._workers
    pid: int = worker.process.pid
    return pid


async def _child(n: int, whole_task_type: str) -> dict[str, Any]:
    from evald_server.domain import TaskType
    from evald_server.scoring import ScoringPool

    kind = TaskType.CLASSIFICATION
    out: dict[str, Any] = {}
    pool = ScoringPool(1)
    try:
        pid = await _started_worker(pool)
        out["started"] = _proc(pid)
        pages = []
        last = PAGE * ((n - 1) // PAGE)  # the last page is scored with the aggregation
        for lo in range(0, last, PAGE):
            pages.append(
                await pool.score_page(
                    kind, _samples(lo, lo + PAGE), context=("neg", "pos"), timeout_s=120
                )
            )
        out["after_pages"] = _proc(pid)
        report = await pool.aggregate(kind, pages, _samples(last, n), seed=1, timeout_s=300)
        assert report is not None
        assert len(report.sample_scores) == n
        out["after_aggregation"] = _proc(pid)
    finally:
        pool.close()
    pool = ScoringPool(1)
    try:
        pid = await _started_worker(pool)
        report = await pool.score(kind, _samples(0, n), seed=1, timeout_s=300)
        assert len(report.sample_scores) == n
        out["after_whole_task"] = _proc(pid)
    finally:
        pool.close()
    if whole_task_type:
        pool = ScoringPool(1)
        try:
            pid = await _started_worker(pool)
            source = _stored_pages(whole_task_type, n)
            report = await pool.score(TaskType(whole_task_type), source, seed=1, timeout_s=300)
            assert report.scored_samples == n
            out[f"after_whole_{whole_task_type}_from_pages"] = _proc(pid)
        finally:
            pool.close()
    return out


def _modules() -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _WORKER_IMPORTS], capture_output=True, text=True, timeout=120
    )
    done.check_returncode()
    modules: list[str] = json.loads(done.stdout)
    return modules


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_worker_memory")
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--whole-task-type", choices=("", "qa", "generation", "classification"), default=""
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(anyio.run(_child, args.n, args.whole_task_type)))
        return
    load_before = os.getloadavg()[0]
    child = subprocess.run(
        [
            *(sys.executable, "-m", "bench.bench_worker_memory", "--child", "--n", str(args.n)),
            *("--whole-task-type", args.whole_task_type),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if child.returncode != 0:
        sys.exit(child.stderr)
    worker = json.loads(child.stdout.splitlines()[-1])
    modules = _modules()
    report = {
        "benchmark": "a scoring worker's memory (spawned by ScoringPool, classification)",
        "command": " ".join(["python -m bench.bench_worker_memory", *sys.argv[1:]]),
        "service_path": os.environ.get("PYTHONPATH", ""),
        "n": args.n,
        "whole_task_type": args.whole_task_type,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        "worker_mb": worker,
        "modules": len(modules),
        "heavy_modules": [name for name in HEAVY if name in modules],
    }
    rows = [
        f"{report['machine']['cpus']} CPUs, load average {report['machine']['load_avg_1m_before']} "
        f"before; N = {args.n}; worker modules {len(modules)}, of them "
        f"{', '.join(report['heavy_modules'])}",
        f"{'worker, MB':28} {'VmRSS':>7} {'VmHWM':>7} {'Pss':>7} {'anon':>7}",
    ]
    for step, mb in worker.items():
        figures = " ".join(f"{mb[key]:7.1f}" for key in ("VmRSS", "VmHWM", "Pss", "Anonymous"))
        rows.append(f"{step:28} {figures}")
    print("\n".join(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
