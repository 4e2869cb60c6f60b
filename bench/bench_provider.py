"""Provider HTTP path: OpenAIProvider vs a bare aiohttp loop vs httpx's default transport.

    python -m bench.bench_provider [--requests 5000] [--concurrency 64]

All three clients run a fixed pool of ``concurrency`` workers against the same fake
provider, started as its own process (so it has its own core) with zero latency. For
each client: requests per second, the client's CPU per request (this process) and the
fake's CPU per request (its process, from ``/_fake/stats``): the fake must cost less
than the client, or it would be the bottleneck. httpx gets fewer requests (it is ~20×
slower here) and every client stops at ``--max-seconds``. Prints a table and writes
``bench/results/provider.json``.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import httpx

from evald_server.config import GenerationParams, ModelConfig
from evald_server.domain import ChatMessage
from evald_server.fake_provider import FakeProcess
from evald_server.providers import OpenAIProvider, ProviderFailure, ProviderRequest

RESULTS = Path(__file__).parent / "results" / "provider.json"
WARMUP = 200
MESSAGES = (
    ChatMessage("system", "Answer with one word."),
    ChatMessage("user", "Capital of France?"),
)

Call = Callable[[int], Awaitable[None]]


@dataclass
class Row:
    client: str
    requests: int
    errors: int
    wall_s: float
    req_per_s: float
    client_cpu_us_per_req: float
    fake_cpu_us_per_req: float | None


def _body() -> bytes:
    return json.dumps(
        {
            "model": "bench",
            "messages": [{"role": m.role, "content": m.content} for m in MESSAGES],
            "temperature": 0.0,
        }
    ).encode()


async def _drive(call: Call, total: int, concurrency: int, deadline_s: float) -> tuple[int, int]:
    """A fixed pool of workers pulling request numbers; returns (done, errors)."""
    next_index = 0
    done = errors = 0
    stop_at = time.monotonic() + deadline_s

    async def worker() -> None:
        nonlocal next_index, done, errors
        while next_index < total and time.monotonic() < stop_at:
            index = next_index
            next_index += 1
            try:
                await call(index)
            except (ProviderFailure, aiohttp.ClientError, httpx.HTTPError):
                errors += 1
            done += 1

    async with anyio.create_task_group() as tg:
        for _ in range(concurrency):
            tg.start_soon(worker)
    return done, errors


async def _measure(
    name: str, call: Call, fake: FakeProcess, total: int, concurrency: int, max_s: float
) -> Row:
    await _drive(call, WARMUP, concurrency, max_s)
    await fake.control.reset()  # the fake's CPU baseline starts here
    cpu0, wall0 = time.process_time(), time.perf_counter()
    done, errors = await _drive(call, total, concurrency, max_s)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    stats = await fake.control.stats()
    return Row(
        client=name,
        requests=done,
        errors=errors,
        wall_s=round(wall, 3),
        req_per_s=round(done / wall, 1),
        client_cpu_us_per_req=round(cpu / done * 1e6, 1),
        # Includes the reset and stats control calls: noise at these counts.
        fake_cpu_us_per_req=(
            None if stats["cpu_per_request_us"] is None else round(stats["cpu_per_request_us"], 1)
        ),
    )


async def _openai(fake: FakeProcess, total: int, concurrency: int, max_s: float) -> Row:
    model = ModelConfig(id="bench", provider="openai", base_url=fake.base_url, timeout_s=30.0)
    provider = OpenAIProvider(model, pool_size=concurrency)
    params = GenerationParams(temperature=0.0)

    async def call(index: int) -> None:
        await provider.complete(ProviderRequest(MESSAGES, params, f"openai-{index}"))

    try:
        return await _measure("OpenAIProvider (aiohttp)", call, fake, total, concurrency, max_s)
    finally:
        await provider.aclose()


async def _bare_aiohttp(fake: FakeProcess, total: int, concurrency: int, max_s: float) -> Row:
    url = fake.base_url + "/v1/chat/completions"
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=30.0)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def call(index: int) -> None:
            headers = {"Content-Type": "application/json", "X-Evald-Subtask": f"bare-{index}"}
            async with session.post(url, data=_body(), headers=headers) as response:
                data = json.loads(await response.read())
                data["choices"][0]["message"]["content"]

        return await _measure("bare aiohttp loop", call, fake, total, concurrency, max_s)


async def _httpx(fake: FakeProcess, total: int, concurrency: int, max_s: float) -> Row:
    url = fake.base_url + "/v1/chat/completions"
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30.0) as client:

        async def call(index: int) -> None:
            headers = {"Content-Type": "application/json", "X-Evald-Subtask": f"httpx-{index}"}
            response = await client.post(url, content=_body(), headers=headers)
            response.json()["choices"][0]["message"]["content"]

        return await _measure("httpx AsyncClient (default)", call, fake, total, concurrency, max_s)


async def _main(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]  # other work on a shared machine skews every figure
    fake_args = ("--latency-ms", "0", "--max-journal-entries", "0")
    async with FakeProcess(*fake_args, stderr=subprocess.DEVNULL) as fake:
        rows = [
            await _openai(fake, args.requests, args.concurrency, args.max_seconds),
            await _bare_aiohttp(fake, args.requests, args.concurrency, args.max_seconds),
            await _httpx(fake, args.httpx_requests, args.concurrency, args.max_seconds),
        ]
    return {
        "benchmark": "provider HTTP path",
        "command": " ".join(["python -m bench.bench_provider", *sys.argv[1:]]),
        "concurrency": args.concurrency,
        "fake_latency_ms": 0,
        "fake": "separate process (python -m evald_server.fake_provider)",
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "aiohttp": version("aiohttp"),
            "httpx": version("httpx"),
            "load_avg_1m_before": round(load_before, 2),
            "load_avg_1m_after": round(os.getloadavg()[0], 2),
        },
        "results": [asdict(row) for row in rows],
    }


def _print(report: dict[str, Any]) -> None:
    header = f"{'client':30} {'requests':>8} {'errors':>6} {'wall s':>7} {'req/s':>8} "
    header += f"{'client CPU µs/req':>17} {'fake CPU µs/req':>15}"
    load = report["machine"]["load_avg_1m_before"]
    print(
        f"C={report['concurrency']}, fake latency 0 ms, fake in its own process, "
        f"{report['machine']['cpus']} CPUs, load average before {load}"
    )
    print(header)
    for row in report["results"]:
        fake_cpu = row["fake_cpu_us_per_req"]
        print(
            f"{row['client']:30} {row['requests']:>8} {row['errors']:>6} {row['wall_s']:>7.2f} "
            f"{row['req_per_s']:>8.0f} {row['client_cpu_us_per_req']:>17.0f} "
            f"{'-' if fake_cpu is None else f'{fake_cpu:.0f}':>15}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_provider")
    parser.add_argument("--requests", type=int, default=5_000)
    parser.add_argument("--httpx-requests", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="cap per client")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    report = anyio.run(_main, args, backend="asyncio")
    _print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
