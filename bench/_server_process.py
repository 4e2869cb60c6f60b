"""An evald server in its own process, as the benchmarks run it.

``python -m evald_server.api --config CONFIG`` is started with its stderr in a file;
it is ready once its first stdout line names the address it listens on; on the way
out it gets SIGTERM (a drain), 30 s to stop, then SIGKILL.
"""

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import psutil
from anyio.streams.buffered import BufferedByteReceiveStream

LISTENING = "evald listening on "


@asynccontextmanager
async def server_process(
    config: Path, stderr_path: Path, *, python_options: Sequence[str] = ()
) -> AsyncIterator[tuple[str, psutil.Process]]:
    """Yields (address, process); ``python_options`` go before ``-m`` (e.g. cProfile)."""
    command = [sys.executable, *python_options, "-m", "evald_server.api", "--config", str(config)]
    with stderr_path.open("ab") as stderr:
        process = await anyio.open_process(command, stdout=subprocess.PIPE, stderr=stderr)
    try:
        assert process.stdout is not None
        with anyio.fail_after(60):
            line = await BufferedByteReceiveStream(process.stdout).receive_until(b"\n", 4096)
        text = line.decode()
        if not text.startswith(LISTENING):
            raise RuntimeError(f"evald did not start: {text!r}; see {stderr_path}")
        yield text[len(LISTENING) :].strip(), psutil.Process(process.pid)
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with anyio.move_on_after(30):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
