"""Reducers over repeats: what the run's reducers add to a task's scoring.

    python -m bench.bench_reducers [--records 20000] [--repeats 5] [--runs 3]

In one process, for R records x n repeats of random correct bools and answer keys:

* shared: ``scoring.reduce_samples`` with pass@1, pass@n, pass^n, majority and mean,
  the way a task is reduced (per-record values vectorised, one bootstrap over the
  records shared by every reducer);
* reference: ``scoring.reduce_records`` once per reducer (its own bootstrap each), the
  module the property tests check against the closed form and brute force.

Both give the same values (checked here); the table shows the wall time of each (the
median of ``--runs``) and their ratio. Writes ``bench/results/reducers.json``.
"""

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from evald_server.scoring import (
    RecordSamples,
    Reducer,
    SampleCorrectness,
    reduce_records,
    reduce_samples,
)

RESULTS = Path(__file__).parent / "results" / "reducers.json"


def _inputs(records: int, repeats: int) -> tuple[SampleCorrectness, list[RecordSamples]]:
    rng = np.random.default_rng(0)
    correct = rng.random((records, repeats)) < rng.random((records, 1))
    answers = rng.integers(0, 4, (records, repeats)).astype(str)
    ids = [f"r{i}" for i in range(records) for _ in range(repeats)]
    shared = SampleCorrectness.of(ids, correct.ravel().tolist(), answers.ravel().tolist())
    per_record = [
        RecordSamples(f"r{i}", tuple(correct[i].tolist()), tuple(answers[i].tolist()))
        for i in range(records)
    ]
    return shared, per_record


def _timed(fn: Any, runs: int) -> tuple[float, Any]:
    walls, result = [], None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - started)
    return statistics.median(walls), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run, 2,000 records")
    args = parser.parse_args()
    records, runs = (2_000, 1) if args.quick else (args.records, args.runs)
    n = args.repeats
    asked: list[tuple[Reducer, int | None]] = [
        (Reducer.PASS_AT_K, 1),
        (Reducer.PASS_AT_K, n),
        (Reducer.PASS_HAT_K, n),
        (Reducer.MAJORITY, None),
        (Reducer.MEAN, None),
    ]
    shared_in, per_record = _inputs(records, n)
    shared_s, shared = _timed(lambda: reduce_samples(shared_in, asked), runs)
    reference_s, reference = _timed(
        lambda: [reduce_records(per_record, r, k) for r, k in asked], runs
    )
    for mine, theirs in zip(shared, reference, strict=True):
        assert mine.name == theirs.name
        assert abs(mine.value - theirs.value) < 1e-9, (mine, theirs)
    figures = {
        "records": records,
        "repeats": n,
        "reducers": [m.name for m in shared],
        "shared_s": round(shared_s, 3),
        "reference_s": round(reference_s, 3),
        "speedup": round(reference_s / shared_s, 2),
        "runs": runs,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }
    print(f"reducers over {records:,} records x {n} repeats: {', '.join(figures['reducers'])}")
    print(f"{'':<34}{'wall s':>8}")
    print(f"{'shared bootstrap (reduce_samples)':<34}{shared_s:>8.2f}")
    print(f"{'one per reducer (reduce_records)':<34}{reference_s:>8.2f}")
    print(f"{'ratio':<34}{reference_s / shared_s:>8.2f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
