"""Real servers for tests: evald in-process or as a subprocess, on 127.0.0.1 port 0.

``running_server`` runs ``evald_server.api.serve`` inside the test's event loop (fast,
shares nothing but the SQLite file); ``ServerProcess`` runs
``python -m evald_server.api`` as a child process, for kill -9 and SIGTERM tests.
Every wait here is bounded.
"""

import hashlib
import os
import selectors
import signal
import subprocess
import sys
import tomllib
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio

from evald_server.api import READY_PREFIX, serve
from evald_server.config import ServerConfig, parse_config

LISTENING = READY_PREFIX
# How long a server process may take to print its ready line: a bound on a hang, not a
# speed. Importing the server alone took 24 s of wall time (1.7 s of CPU) at load 17.
START_TIMEOUT_S = 120.0


def config_data(
    tmp_path: Path,
    *,
    models: list[dict[str, Any]] | None = None,
    limits: Mapping[str, Any] | None = None,
    tokens: Mapping[str, str] | None = None,
    server: Mapping[str, Any] | None = None,
    engine: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A config document: a fresh SQLite file, loopback port 0 with a 2 s grace (or
    ``server``), simulated models by default, ``limits`` and ``engine`` tuning.

    ``tokens`` maps a tenant to its clear-text bearer token (stored hashed, as in a
    real config).
    """
    data: dict[str, Any] = {
        "server": dict(server) if server is not None else {"listen": "127.0.0.1:0", "grace_s": 2.0},
        "store": {"url": f"sqlite:///{tmp_path / 'evald.sqlite3'}"},
        "limits": dict(limits or {}),
        "engine": dict(engine or {}),
        "models": models
        if models is not None
        else [
            {
                "id": "sim-good",
                "provider": "simulated",
                "max_concurrency": 8,
                "simulator": {"accuracy": 0.9, "latency_ms_median": 2.0, "seed": 1},
            },
            {
                "id": "sim-weak",
                "provider": "simulated",
                "max_concurrency": 4,
                "simulator": {"accuracy": 0.5, "latency_ms_median": 1.0, "seed": 2},
            },
        ],
    }
    if tokens:
        data["auth"] = {
            "tokens": [
                {"tenant": tenant, "sha256": hashlib.sha256(token.encode()).hexdigest()}
                for tenant, token in tokens.items()
            ]
        }
    return data


def make_config(tmp_path: Path, **options: Any) -> ServerConfig:
    return parse_config(config_data(tmp_path, **options))


def write_config(tmp_path: Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` as TOML (the subset our configs use) and return the path."""
    lines: list[str] = []

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list | tuple):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return repr(v)

    for section in ("server", "store", "limits", "engine", "sandbox"):
        if data.get(section):
            lines.append(f"[{section}]")
            lines += [f"{k} = {value(v)}" for k, v in data[section].items()]
    for model in data.get("models", []):
        lines.append("[[models]]")
        lines += [f"{k} = {value(v)}" for k, v in model.items()]
    for token in data.get("auth", {}).get("tokens", []):
        lines.append("[[auth.tokens]]")
        lines += [f"{k} = {value(v)}" for k, v in token.items()]
    text = "\n".join(lines) + "\n"
    tomllib.loads(text)  # what we write must be what we meant
    path = tmp_path / "evald.toml"
    path.write_text(text)
    return path


@asynccontextmanager
async def running_server(config: ServerConfig) -> AsyncIterator[str]:
    """Serve ``config`` in this event loop; yields "127.0.0.1:PORT"."""
    ready = anyio.Event()
    address: list[str] = []

    def on_ready(bound: str) -> None:
        address.append(bound)
        ready.set()

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            await serve(config, on_ready=on_ready)

        tg.start_soon(run)
        with anyio.fail_after(30):
            await ready.wait()
        try:
            yield address[0]
        finally:
            tg.cancel_scope.cancel()


class ServerProcess:
    """``python -m evald_server.api --config PATH`` as a child process."""

    def __init__(self, config_path: Path, *, env: Mapping[str, str] | None = None) -> None:
        self.config_path = config_path
        self.env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[str] | None = None
        self.address = ""
        self.stderr_path = config_path.with_suffix(f".{os.getpid()}.stderr")

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        stderr = self.stderr_path.open("a")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "evald_server.api", "--config", str(self.config_path)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=self.env,
        )
        stderr.close()
        assert self.process.stdout is not None
        line = _readline_within(self.process, timeout_s)
        if not line.startswith(LISTENING):
            self.kill()
            raise RuntimeError(f"server did not start: {line!r}; stderr: {self.stderr()}")
        self.address = line[len(LISTENING) :].strip()
        return self.address

    def stderr(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    def terminate(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then wait for the drain to finish; returns the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout_s)
        finally:
            self._close_pipe()

    def kill(self) -> None:
        """SIGKILL: no drain, no flush — a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()


@contextmanager
def server_process(tmp_path: Path, data: Mapping[str, Any] | None = None) -> Iterator[str]:
    """``python -m evald_server.api`` on ``data`` (default ``config_data(tmp_path)``) for
    the block, drained with SIGTERM after it; yields its address."""
    process = ServerProcess(write_config(tmp_path, data or config_data(tmp_path)))
    try:
        yield process.start()
    finally:
        if process.process is not None and process.process.poll() is None:
            process.terminate()


def _readline_within(process: subprocess.Popen[str], timeout_s: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            process.kill()
            raise TimeoutError(f"no output from the server within {timeout_s} s")
    return process.stdout.readline()
