"""Drive a fake provider that runs in another process.

``FakeProcess`` starts ``python -m evald_server.fake_provider`` and reads its URL
from the first stdout line; ``FakeControl`` talks to any fake's control API. Tests
that kill and restart evald keep one fake process alive across the restarts and
read its journal here.
"""

import json
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Self

import aiohttp
import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from evald_server.fake_provider._journal import JournalEntry


class FakeControl:
    """A client of the ``/_fake/*`` control API (one short-lived session per call)."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    async def journal(self, since: int = 0) -> list[JournalEntry]:
        data = await self._call("GET", f"/_fake/journal?since={since}")
        return [JournalEntry.from_json(item) for item in data["entries"]]

    async def duplicates_after_success(self) -> dict[str, int]:
        data = await self._call("GET", "/_fake/journal?since=0")
        return {str(k): int(v) for k, v in data["duplicates_after_success"].items()}

    async def stats(self) -> dict[str, Any]:
        return await self._call("GET", "/_fake/stats")

    async def configure(self, **fields: Any) -> dict[str, Any]:
        """Replace config fields, in the JSON shape of ``FakeConfig.to_json``."""
        return await self._call("POST", "/_fake/config", fields)

    async def reset(self) -> None:
        await self._call("POST", "/_fake/reset", {})

    async def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        timeout = aiohttp.ClientTimeout(total=30)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.request(method, self.base_url + path, json=body) as response,
        ):
            data = json.loads(await response.read())
            if response.status != 200:
                raise RuntimeError(f"fake control {path}: HTTP {response.status}: {data}")
            if not isinstance(data, dict):
                raise RuntimeError(f"fake control {path}: not a JSON object")
            return data


class FakeProcess:
    """A fake provider in a child process; ``args`` are its command-line options.

    Its stderr (errors, and its stats when it stops) goes to ours unless ``stderr``
    says otherwise (e.g. ``subprocess.DEVNULL``).
    """

    def __init__(
        self, *args: str, startup_timeout_s: float = 20.0, stderr: int | None = None
    ) -> None:
        self._args: Sequence[str] = args
        self._startup_timeout_s = startup_timeout_s
        self._stderr = stderr
        self._process: anyio.abc.Process | None = None
        self._base_url: str | None = None

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("the fake process is not started")
        return self._base_url

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError("the fake process is not started")
        return self._process.pid

    @property
    def control(self) -> FakeControl:
        return FakeControl(self.base_url)

    async def start(self) -> str:
        command = [sys.executable, "-m", "evald_server.fake_provider", *self._args]
        process = await anyio.open_process(command, stdout=subprocess.PIPE, stderr=self._stderr)
        self._process = process
        assert process.stdout is not None  # requested above
        try:
            with anyio.fail_after(self._startup_timeout_s):
                line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096)
        except BaseException:
            await self.stop()
            raise
        self._base_url = line.decode().strip()
        if not self._base_url.startswith("http://127.0.0.1:"):
            await self.stop()
            raise RuntimeError(f"the fake process printed {self._base_url!r}, not its URL")
        return self._base_url

    async def stop(self, *, timeout_s: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; returns the exit code."""
        process, self._process = self._process, None
        if process is None:
            return None
        with anyio.CancelScope(shield=True):  # never leave an orphan behind, even when cancelled
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with anyio.move_on_after(timeout_s):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await process.aclose()
        return process.returncode

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
