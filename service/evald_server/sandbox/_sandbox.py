"""The sandbox: run a ``TestJob`` in a fresh sandbox under a slot, and say whether
sandboxing works on this machine at all.

``Sandbox.run`` waits for a slot (``SandboxSlots``) and runs the job in it; a
dispatcher that holds slots itself calls ``run_in_slot``. Each run builds a new
sandbox (``_command``), runs it as a subprocess off the event loop (``_process``),
reads the harness's authenticated records (``_protocol``) and judges them with the
process's end (``_verdicts``). ``check_sandbox`` tells, with a message naming what is
missing, whether code can run here: static prerequisites first, then a real probe
program through the same path. Code tasks are refused where it says no; nothing
ever runs unsandboxed.
"""

import os
import platform
from dataclasses import dataclass
from importlib import resources

from evald_server.sandbox._command import (
    PRLIMIT,
    SETPRIV,
    Fds,
    sandbox_command,
    system_mounts,
)
from evald_server.sandbox._errors import SandboxError, SandboxUnavailable
from evald_server.sandbox._process import FinishedProcess, run_process
from evald_server.sandbox._protocol import TestJob, encode_job, new_nonce, read_records
from evald_server.sandbox._seccomp import UnsupportedArchitecture, seccomp_filter
from evald_server.sandbox._settings import SandboxSettings
from evald_server.sandbox._slots import SandboxSlots, SlotStats
from evald_server.sandbox._verdicts import (
    CapturedOutput,
    ProcessEnd,
    SandboxResult,
    Verdict,
    judge,
)

_ERROR_TAIL_CHARS = 600  # of bwrap's or the interpreter's stderr in a SandboxError
_PROBE = TestJob(program="value = 6 * 7\n", tests=("assert value == 42\n",))


@dataclass(frozen=True, slots=True)
class SandboxCheck:
    """Whether programs can run sandboxed here, and if not, what is missing."""

    available: bool
    message: str


def harness_source() -> str:
    return resources.files("evald_server.sandbox").joinpath("_harness.py").read_text("utf-8")


class Sandbox:
    """Runs programs, each in a fresh sandbox, at most ``settings.slots`` at once."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.slots = SandboxSlots(settings.slots)
        self._mounts = system_mounts(settings.system_paths)
        self._harness = harness_source()
        self._checked: SandboxCheck | None = None

    def stats(self) -> SlotStats:
        return self.slots.stats()

    async def check(self) -> SandboxCheck:
        """``check_sandbox`` once; a positive answer is kept, a negative one asked again."""
        if self._checked is None or not self._checked.available:
            self._checked = await _check(self)
        return self._checked

    async def run(self, job: TestJob) -> SandboxResult:
        """Wait for a slot, then run ``job`` in it."""
        async with self.slots.hold() as slot:
            return await self.run_in_slot(job, slot)

    async def run_in_slot(self, job: TestJob, slot: int) -> SandboxResult:
        """Run ``job`` in ``slot``, which the caller holds. Raises ``SandboxError`` when
        the sandbox itself fails; a failure of the program is its verdict."""
        if not 0 <= slot < self.settings.slots:
            raise ValueError(f"slot {slot} is not one of the {self.settings.slots} slots")
        settings = self.settings
        try:
            seccomp = seccomp_filter()
        except UnsupportedArchitecture as exc:
            raise SandboxUnavailable(str(exc)) from exc
        nonce = new_nonce()

        def build(result_fd: int, fds: Fds) -> tuple[list[str], bytes]:
            command = sandbox_command(
                settings, slot=slot, mounts=self._mounts, fds=fds, harness=self._harness
            )
            body = encode_job(
                job,
                nonce=nonce,
                result_fd=result_fd,
                trusted_prefixes=settings.system_paths,
                traceback_lines=settings.traceback_lines,
            )
            return command, body

        finished = await run_process(
            build,
            seccomp=seccomp,
            wall_timeout_s=settings.wall_timeout_s,
            output_bytes=settings.output_bytes,
        )
        records = read_records(finished.result, nonce=nonce, tests=len(job.tests))
        if not records.started:
            raise SandboxError(_not_started(finished, settings))
        output = CapturedOutput(
            stdout=finished.stdout.decode("utf-8", "replace"),
            stderr=finished.stderr.decode("utf-8", "replace"),
            stdout_truncated=finished.stdout_size > len(finished.stdout),
            stderr_truncated=finished.stderr_size > len(finished.stderr),
        )
        end = ProcessEnd(finished.exit_status, finished.timed_out, finished.duration_s)
        return judge(
            records,
            end,
            output,
            tests=len(job.tests),
            wall_timeout_s=settings.wall_timeout_s,
            cpu_seconds=settings.cpu_seconds,
        )


def _not_started(finished: FinishedProcess, settings: SandboxSettings) -> str:
    tail = finished.stderr.decode("utf-8", "replace").strip()[-_ERROR_TAIL_CHARS:]
    if finished.timed_out:
        ended = f"did not start within the deadline ({settings.wall_timeout_s:g} s)"
    else:
        ended = f"ended with status {finished.exit_status} before the harness started"
    return f"the sandbox {ended}" + (f": {tail}" if tail else "")


async def check_sandbox(settings: SandboxSettings) -> SandboxCheck:
    """Whether programs can run sandboxed here; the message names what is missing."""
    return await _check(Sandbox(settings))


async def _check(sandbox: Sandbox) -> SandboxCheck:
    settings = sandbox.settings
    missing = missing_prerequisites(settings)
    if missing:
        return SandboxCheck(False, "the code sandbox cannot run: " + "; ".join(missing))
    try:
        result = await sandbox.run(_PROBE)
    except SandboxError as exc:
        return SandboxCheck(False, f"the code sandbox cannot run: {exc}")
    if result.verdict is not Verdict.PASSED:
        detail = f": {result.detail.strip()[-_ERROR_TAIL_CHARS:]}" if result.detail else ""
        return SandboxCheck(
            False,
            f"the code sandbox cannot run: a probe program ended {result.verdict.value} "
            f"({result.reason}){detail}",
        )
    return SandboxCheck(
        True,
        f"bubblewrap sandbox: {settings.slots} slots, uids {settings.uid_base}.."
        f"{settings.slot_uid(settings.slots - 1)}, {settings.python}",
    )


def missing_prerequisites(settings: SandboxSettings) -> list[str]:
    """What this machine lacks for the sandbox, without starting anything."""
    missing = []
    if platform.system() != "Linux":
        return [f"it needs Linux (this is {platform.system()})"]
    try:
        seccomp_filter()
    except UnsupportedArchitecture as exc:
        missing.append(str(exc))
    if os.geteuid() != 0:
        missing.append(
            "the server must run as root: each slot runs its programs under its own "
            "unprivileged uid (sandbox.uid_base + slot), which only root can switch to, "
            "and without it RLIMIT_NPROC cannot bound a fork bomb"
        )
    tools = {
        "bubblewrap": (settings.bwrap, "apt-get install bubblewrap"),
        "setpriv": (SETPRIV, "apt-get install util-linux"),
        "prlimit": (PRLIMIT, "apt-get install util-linux"),
        "the sandbox's python": (settings.python, "set sandbox.python"),
    }
    for name, (path, fix) in tools.items():
        if not os.access(path, os.X_OK):
            missing.append(f"{name} is missing: no executable {path} ({fix})")
    return missing
