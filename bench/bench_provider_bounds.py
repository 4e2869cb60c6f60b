"""Server memory while a provider sends too much: a 100 MB body, an endless stream.

    python -m bench.bench_provider_bounds [--records 4] [--retries 1]

Two processes: the fake provider (``python -m evald_server.fake_provider``) answering
every request with ``Behaviour.flood`` — a valid 100 MB JSON completion, or an SSE
stream of 60 kB deltas that never ends — and the evald server
(``python -m evald_server.api``) with the default caps (``max_response_bytes`` 8 MiB,
``max_answer_bytes`` 1 MiB). One run per scenario (``--records`` subtasks, each tried
``1 + --retries`` times) through the SDK. The figure is the server's peak RSS: the
kernel's high-water mark (``VmHWM`` in ``/proc/<pid>/status``) read before the server
stops, and psutil samples every 20 ms beside it. Target: < 300 MB. Also reported: how
each sample ended (every one PROVIDER_BAD_RESPONSE naming the cap) and the run's wall.
Writes ``bench/results/provider_bounds.json``.
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench._server_process import server_process
from evald_client import AsyncEvaldClient, RetryPolicy
from evald_server.fake_provider import FakeProcess

RESULTS = Path(__file__).parent / "results" / "provider_bounds.json"
TARGET_MB = 300.0
SCENARIOS = {
    "100 MB body": ({"kind": "flood", "body_bytes": 100 * 1024 * 1024}, False),
    "endless 60 kB-delta stream": ({"kind": "flood", "body_bytes": 0, "delta_bytes": 60_000}, True),
}


def _toml(where: Path, fake_url: str, stream: bool) -> str:
    return f"""[server]
listen = "127.0.0.1:0"
grace_s = 2.0
[store]
url = "sqlite:///{where / "evald.sqlite3"}"
[[models]]
id = "flood"
provider = "openai"
base_url = "{fake_url}"
max_concurrency = 4
timeout_s = 60.0
stream = {"true" if stream else "false"}
"""


def _high_water_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/<pid>/status")


async def _scenario(
    name: str, behaviour: dict[str, Any], stream: bool, args: Any
) -> dict[str, Any]:
    config = json.dumps({"faults": [{"rate": 1.0, "behaviour": behaviour}]})
    with tempfile.TemporaryDirectory(prefix="evald-bounds-") as tmp:
        where = Path(tmp)
        async with FakeProcess("--config-json", config, stderr=subprocess.DEVNULL) as fake:
            (where / "evald.toml").write_text(_toml(where, fake.base_url, stream))
            served = server_process(where / "evald.toml", where / "server.stderr")
            async with served as (address, server):
                sampled_peak = 0.0
                done = anyio.Event()

                async def sample() -> None:
                    nonlocal sampled_peak
                    while not done.is_set():
                        sampled_peak = max(sampled_peak, server.memory_info().rss / 2**20)
                        await anyio.sleep(0.02)

                async with anyio.create_task_group() as tg, AsyncEvaldClient(address) as client:
                    tg.start_soon(sample)
                    records = [
                        {"id": f"r{i}", "input": f"say {i}", "reference": f"{i}"}
                        for i in range(args.records)
                    ]
                    await client.upload_dataset(
                        name="d", version="1.0.0", task_type="generation", records=records
                    )
                    started = time.perf_counter()
                    run = await client.create_run(
                        models=["flood"],
                        datasets=[("d", "1.0.0")],
                        retry_policy=RetryPolicy(
                            max_retries=args.retries, backoff_s=(0.05,), jitter_fraction=0.0
                        ),
                    )
                    with anyio.fail_after(300):
                        run = await client.wait(run.run_id)
                    wall_s = time.perf_counter() - started
                    samples = [s async for s in client.samples(run.run_id)]
                    done.set()
                    high_water = _high_water_mb(server.pid)  # before the drain
            sent = await fake.control.stats()
    errors = sorted({(s.last_error.reason, s.last_error.message) for s in samples if s.last_error})
    return {
        "scenario": name,
        "records": args.records,
        "attempts": sum(s.attempts for s in samples),
        "run_state": run.state.value,
        "states": sorted({s.state.value for s in samples}),
        "errors": [f"{reason}: {message}" for reason, message in errors],
        "peak_rss_mb": round(high_water, 1),
        "sampled_peak_rss_mb": round(sampled_peak, 1),
        "wall_s": round(wall_s, 2),
        "fake_requests": sent["requests"],
        "met": high_water < TARGET_MB,
    }


async def _main(args: Any) -> list[dict[str, Any]]:
    return [await _scenario(name, b, stream, args) for name, (b, stream) in SCENARIOS.items()]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_provider_bounds")
    parser.add_argument("--records", type=int, default=4)
    parser.add_argument("--retries", type=int, default=1)
    args = parser.parse_args()
    rows = anyio.run(_main, args)
    print(f"{'scenario':<28} {'peak RSS':>9} {'sampled':>8} {'attempts':>8} {'wall':>7}  target")
    for row in rows:
        print(
            f"{row['scenario']:<28} {row['peak_rss_mb']:>6.1f} MB "
            f"{row['sampled_peak_rss_mb']:>5.1f} MB {row['attempts']:>8} "
            f"{row['wall_s']:>6.2f}s  < {TARGET_MB:.0f} MB "
            f"{'met' if row['met'] else 'MISSED'}"
        )
        for error in row["errors"]:
            print(f"    {error}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"target_mb": TARGET_MB, "scenarios": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
