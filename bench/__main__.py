"""Run every benchmark of bench/ in turn: ``python -m bench`` (what ``make bench`` runs).

    python -m bench                 # every bench_*.py module, in name order
    python -m bench e2e engine      # only these (names with or without "bench_")
    python -m bench --list

Each benchmark runs as its own process (``python -m bench.<module>``), so that one
cannot skew another through a warm cache, a leftover event loop or memory; each
prints its table and writes its JSON under bench/results/. The exit status is
non-zero when a benchmark failed to run (not when it missed a target: targets are
figures to report, and each table says met or MISSED).
"""

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


def modules() -> list[str]:
    return sorted(p.stem for p in HERE.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    available = modules()
    if args.list:
        print("\n".join(available))
        return 0
    chosen = [n if n.startswith("bench_") else f"bench_{n}" for n in args.names] or available
    unknown = sorted(set(chosen) - set(available))
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; available: {available}")
    failed = []
    for name in chosen:
        print(f"\n== {name} ==", flush=True)
        started = time.perf_counter()
        code = subprocess.run([sys.executable, "-m", f"bench.{name}"], check=False).returncode
        print(f"== {name}: exit {code} after {time.perf_counter() - started:.0f} s ==", flush=True)
        if code != 0:
            failed.append(name)
    if failed:
        print(f"failed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
