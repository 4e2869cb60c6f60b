"""Run the fake provider as its own process.

    python -m evald_server.fake_provider --port 0 --latency-ms 50 --fault 503=0.05

The first stdout line is the bound URL (``http://127.0.0.1:PORT``); everything else
goes to stderr. SIGTERM or SIGINT stops it (exit 0), printing its stats to stderr.
"""

import argparse
import asyncio
import json
import os
import signal
import sys

from evald_server.fake_provider._behaviour import Behaviour, FakeConfig, FaultRate
from evald_server.fake_provider._server import FakeProvider

_FAULT_KINDS = "429, 4xx/5xx status codes, hang, reset, malformed"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m evald_server.fake_provider")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="median latency")
    parser.add_argument("--latency-sigma", type=float, default=0.0, help="log-normal shape")
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="KIND=RATE",
        help=f"a share of requests that fail; KIND is one of {_FAULT_KINDS}",
    )
    parser.add_argument("--retry-after-s", type=float, help="Retry-After sent with 429s")
    parser.add_argument("--retry-after-ms", type=float, help="retry-after-ms sent with 429s")
    parser.add_argument("--hang-s", type=float, default=600.0, help="how long a hang lasts")
    parser.add_argument("--stream-chunk-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--api-key-env", help="require Authorization: Bearer $VAR (the env var's name)"
    )
    parser.add_argument("--config-json", help="a FakeConfig JSON object applied last")
    parser.add_argument("--max-journal-entries", type=int, default=1_000_000)
    return parser.parse_args(argv)


def _fault(spec: str, args: argparse.Namespace) -> FaultRate:
    kind, sep, rate = spec.partition("=")
    if not sep:
        raise SystemExit(f"--fault {spec!r}: expected KIND=RATE")
    named = {"hang": Behaviour.hang, "reset": Behaviour.reset, "malformed": Behaviour.malformed}
    if kind in named:
        behaviour = named[kind]()
    elif kind.isdigit():
        behaviour = Behaviour.error(
            int(kind), retry_after_s=args.retry_after_s, retry_after_ms=args.retry_after_ms
        )
    else:
        raise SystemExit(f"--fault {spec!r}: KIND must be one of {_FAULT_KINDS}")
    return FaultRate(behaviour, float(rate))


def _config(args: argparse.Namespace) -> FakeConfig:
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise SystemExit(f"--api-key-env: environment variable {args.api_key_env!r} is empty")
    config = FakeConfig(
        latency_ms=args.latency_ms,
        latency_sigma=args.latency_sigma,
        faults=tuple(_fault(spec, args) for spec in args.fault),
        hang_s=args.hang_s,
        stream_chunk_ms=args.stream_chunk_ms,
        api_key=api_key,
        seed=args.seed,
    )
    if args.config_json:
        config = config.updated(json.loads(args.config_json))
    return config


async def _serve(args: argparse.Namespace) -> None:
    fake = FakeProvider(_config(args), port=args.port, max_journal_entries=args.max_journal_entries)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    url = await fake.start()
    print(url, flush=True)
    try:
        await stop.wait()
    finally:
        await fake.stop()
        stats = fake.stats()
        stats.pop("config")
        print(json.dumps(stats), file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except ValueError as exc:  # a bad fault rate, latency or config JSON
        print(f"fake provider: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
