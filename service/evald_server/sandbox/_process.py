"""Run one sandbox process: start it, feed it its job, read what it reports, and end it
by the wall-clock deadline, without ever blocking the event loop.

stdout and stderr go to memfds (anonymous in-memory files), not pipes: the program
writes without waiting on evald, RLIMIT_FSIZE bounds them like any file, and evald
reads only the first ``output_bytes`` of each after the end. The harness's records
come on a pipe read as they arrive, up to ``MAX_RESULT_BYTES``; bwrap's info fd gives
the pid of the namespace's init (the harness), opened as a pidfd at once so that a
kill at the deadline can never hit a recycled pid. Killing that init kills every
process of the sandbox (the kernel empties a pid namespace whose init dies) and bwrap
exits once it has reaped it, so when ``run_process`` returns nothing of the run is
left. A cancelled caller gets the same cleanup, shielded.
"""

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import anyio.abc

from evald_server.sandbox._command import Fds
from evald_server.sandbox._protocol import MAX_RESULT_BYTES

KILL_GRACE_S = 5.0  # after the init's SIGKILL, for bwrap to reap it and exit
_MAX_INFO_BYTES = 64 << 10
_READ_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class FinishedProcess:
    """What a run left: its exit, its records' bytes, the start of its output."""

    exit_status: int | None  # bwrap's (128 + n: its program died of signal n)
    timed_out: bool
    duration_s: float
    result: bytes
    stdout: bytes
    stdout_size: int  # bytes the program wrote, of which ``stdout`` is the start
    stderr: bytes
    stderr_size: int
    child_pid: int | None  # the namespace init's host pid, from bwrap's info fd
    pid_namespace: int | None  # its pid namespace's inode


@dataclass(slots=True)
class _Reading:
    result: bytearray
    info: bytearray
    child_pid: int | None = None
    pid_namespace: int | None = None
    pidfd: int | None = None


BuildCommand = Callable[[int, Fds], tuple[list[str], bytes]]


async def run_process(
    build: BuildCommand,
    *,
    seccomp: bytes,
    wall_timeout_s: float,
    output_bytes: int,
) -> FinishedProcess:
    """Start the command ``build(result_fd, fds)`` returns, with its job on stdin."""
    own: list[int] = []  # descriptors to close at the end

    def keep(fd: int) -> int:
        own.append(fd)
        return fd

    try:
        stdout = keep(os.memfd_create("evald-sandbox-stdout", os.MFD_CLOEXEC))
        stderr = keep(os.memfd_create("evald-sandbox-stderr", os.MFD_CLOEXEC))
        result_r, result_w = (keep(fd) for fd in os.pipe())
        info_r, info_w = (keep(fd) for fd in os.pipe())
        seccomp_r, seccomp_w = (keep(fd) for fd in os.pipe())
        os.write(seccomp_w, seccomp)  # a few hundred bytes: the pipe holds them
        _close(own, seccomp_w)
        for fd in (result_r, info_r):
            os.set_blocking(fd, False)
        command, job = build(result_w, Fds(info=info_w, seccomp=seccomp_r))
        reading = _Reading(result=bytearray(), info=bytearray())
        started = time.monotonic()
        process = await anyio.open_process(
            command,
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=stderr,
            pass_fds=(result_w, info_w, seccomp_r),
            env={},
            start_new_session=True,
        )
        for fd in (result_w, info_w, seccomp_r):
            _close(own, fd)  # only the sandbox holds them now: EOF when it is gone
        timed_out = False
        try:
            with anyio.move_on_after(wall_timeout_s) as deadline:
                async with anyio.create_task_group() as group:
                    group.start_soon(_feed, process, job)
                    group.start_soon(_read_info, info_r, reading)
                    group.start_soon(_read_result, result_r, reading)
                await process.wait()
            timed_out = deadline.cancelled_caught
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    await _kill(process, reading)
                await process.aclose()
                if reading.pidfd is not None:
                    os.close(reading.pidfd)
        duration = time.monotonic() - started
        stdout_data, stdout_size = _head(stdout, output_bytes)
        stderr_data, stderr_size = _head(stderr, output_bytes)
        return FinishedProcess(
            exit_status=None if timed_out else process.returncode,
            timed_out=timed_out,
            duration_s=duration,
            result=bytes(reading.result),
            stdout=stdout_data,
            stdout_size=stdout_size,
            stderr=stderr_data,
            stderr_size=stderr_size,
            child_pid=reading.child_pid,
            pid_namespace=reading.pid_namespace,
        )
    finally:
        for fd in own:
            with contextlib.suppress(OSError):
                os.close(fd)


def _close(own: list[int], fd: int) -> None:
    own.remove(fd)
    os.close(fd)


async def _feed(process: anyio.abc.Process, job: bytes) -> None:
    assert process.stdin is not None  # opened as a pipe
    try:
        await process.stdin.send(job)
        await process.stdin.aclose()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the harness ended without reading its job: its exit says why


async def _read_pipe(fd: int, sink: bytearray, limit: int) -> None:
    """Append what ``fd`` brings to ``sink`` until EOF, up to ``limit`` bytes; past it,
    stop reading (a writer that goes on then blocks, until the deadline)."""
    while len(sink) < limit:
        await anyio.wait_readable(fd)
        try:
            chunk = os.read(fd, min(_READ_CHUNK, limit - len(sink)))
        except BlockingIOError:
            continue
        if not chunk:
            return
        sink += chunk


async def _read_result(fd: int, reading: _Reading) -> None:
    await _read_pipe(fd, reading.result, MAX_RESULT_BYTES)


async def _read_info(fd: int, reading: _Reading) -> None:
    await _read_pipe(fd, reading.info, _MAX_INFO_BYTES)
    try:
        info = json.loads(reading.info)
    except ValueError:
        return  # bwrap failed before it started the sandbox: its exit status says so
    pid = info.get("child-pid") if isinstance(info, dict) else None
    namespace = info.get("pid-namespace") if isinstance(info, dict) else None
    if isinstance(pid, int) and pid > 1:
        reading.child_pid = pid
        with contextlib.suppress(OSError):
            reading.pidfd = os.pidfd_open(pid)
    if isinstance(namespace, int):
        reading.pid_namespace = namespace


async def _kill(process: anyio.abc.Process, reading: _Reading) -> None:
    """Kill the sandbox's init (and with it every process of the sandbox), wait for
    bwrap to reap it and exit; kill bwrap too if it does not."""
    if reading.pidfd is not None:
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pidfd_send_signal(reading.pidfd, signal.SIGKILL)
        with anyio.move_on_after(KILL_GRACE_S):
            await process.wait()
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def _head(fd: int, limit: int) -> tuple[bytes, int]:
    """The first ``limit`` bytes of a memfd and its whole size."""
    size = os.fstat(fd).st_size
    return os.pread(fd, min(limit, size), 0), size
