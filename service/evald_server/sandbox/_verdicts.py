"""A sandbox run's verdict, from how the process ended and what the harness reported.

The verdict never comes from text the program prints. ``PASSED`` needs all three of:
the process exited with status 0 before the deadline, the harness's authenticated
``done`` record, and an authenticated ``passed`` record for the program and for every
test. Otherwise, first match wins:

1. the wall-clock deadline passed: ``TIMEOUT``;
2. the process died of SIGXCPU (RLIMIT_CPU): ``TIMEOUT``; of SIGKILL that evald did not
   send (the CPU hard limit, or the kernel's OOM killer) or of SIGXFSZ:
   ``RESOURCE_LIMIT``;
3. the first outcome that is not a pass, the program's then the tests' in order:
   ``FAILED`` (an AssertionError in a test), ``RESOURCE_LIMIT`` (MemoryError, EMFILE,
   EFBIG, ENOSPC, a refused fork) or ``ERROR`` (any other exception, the program's own
   failing ``assert`` included);
4. anything else — the process ended (``os._exit(0)`` in the program, a signal) before
   the harness said ``done``, or a test has no outcome — ``ERROR``.

``NO_PROGRAM`` is given by the caller when no program could be read from an answer.
"""

import signal
from dataclasses import dataclass
from enum import StrEnum

from evald_server.sandbox._protocol import Outcome, Records, Resource, TestStatus

_STATUS_VERDICT = {
    TestStatus.FAILED: "failed",
    TestStatus.ERROR: "error",
    TestStatus.RESOURCE_LIMIT: "resource_limit",
}
# bwrap exits with 128 + n when the program died of signal n.
_SIGNAL_BASE = 128


class Verdict(StrEnum):
    """How a sample's program fared against its tests."""

    PASSED = "passed"
    FAILED = "failed"  # a test's assertion failed
    ERROR = "error"  # an exception (with the last lines of its traceback), a crash
    TIMEOUT = "timeout"  # the wall-clock deadline or the CPU-time limit
    RESOURCE_LIMIT = "resource_limit"  # memory, processes, open files, file size, disk
    NO_PROGRAM = "no_program"  # nothing to run could be read from the answer


@dataclass(frozen=True, slots=True)
class TestOutcome:
    """One test's outcome (``index`` in the job's order)."""

    __test__ = False  # not a pytest test class

    index: int
    status: TestStatus
    resource: Resource = Resource.NONE
    error_type: str = ""
    detail: str = ""  # the last lines of the traceback


@dataclass(frozen=True, slots=True)
class ProcessEnd:
    """How the sandbox's process ended, as the host saw it."""

    exit_status: int | None  # bwrap's exit status (128 + n: signal n); None if killed
    timed_out: bool  # evald killed it at the wall-clock deadline
    duration_s: float


@dataclass(frozen=True, slots=True)
class CapturedOutput:
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """Everything a sample keeps of its sandbox run; all of it is data."""

    verdict: Verdict
    reason: str  # one line: why this verdict ("test 2 failed", "cpu time limit (5 s)")
    error_type: str  # the exception of the deciding outcome ("" when none)
    detail: str  # its traceback's last lines, bounded
    resource: Resource
    tests: tuple[TestOutcome, ...]
    exit_status: int | None
    signal: int | None  # the signal the program died of, where the status says one
    duration_s: float
    output: CapturedOutput
    unauthenticated_records: int = 0  # lines on the result channel without the nonce

    @property
    def passed(self) -> bool:
        return self.verdict is Verdict.PASSED


def no_program_result(reason: str) -> SandboxResult:
    """The result of a sample whose answer held no program to run."""
    return SandboxResult(
        verdict=Verdict.NO_PROGRAM,
        reason=reason,
        error_type="",
        detail="",
        resource=Resource.NONE,
        tests=(),
        exit_status=None,
        signal=None,
        duration_s=0.0,
        output=CapturedOutput("", "", False, False),
    )


def judge(
    records: Records,
    end: ProcessEnd,
    output: CapturedOutput,
    *,
    tests: int,
    wall_timeout_s: float,
    cpu_seconds: int,
) -> SandboxResult:
    """The verdict of a finished run (see the module docstring for the rules)."""
    outcomes = tuple(_test_outcome(records.tests.get(i), i) for i in range(tests))
    died_of = _signal_of(end.exit_status)

    def result(
        verdict: Verdict,
        reason: str,
        outcome: Outcome | None = None,
        resource: Resource = Resource.NONE,
    ) -> SandboxResult:
        return SandboxResult(
            verdict=verdict,
            reason=reason,
            error_type=outcome.error_type if outcome else "",
            detail=outcome.detail if outcome else "",
            resource=outcome.resource if outcome and not resource else resource,
            tests=outcomes,
            exit_status=end.exit_status,
            signal=died_of,
            duration_s=end.duration_s,
            output=output,
            unauthenticated_records=records.unauthenticated,
        )

    if end.timed_out:
        return result(Verdict.TIMEOUT, f"wall-clock deadline ({wall_timeout_s:g} s)")
    if died_of == signal.SIGXCPU:
        return result(Verdict.TIMEOUT, f"cpu time limit ({cpu_seconds} s)", resource=Resource.CPU)
    if died_of == signal.SIGKILL:
        reason = "killed by SIGKILL (the CPU hard limit or the kernel's out-of-memory killer)"
        return result(Verdict.RESOURCE_LIMIT, reason, resource=Resource.KILLED)
    if died_of == signal.SIGXFSZ:
        return result(Verdict.RESOURCE_LIMIT, "file size limit", resource=Resource.FILE_SIZE)
    failure = _first_failure(records, outcomes)
    if failure is not None:
        where, outcome = failure
        verdict = Verdict(_STATUS_VERDICT[outcome.status])
        what = {
            Verdict.FAILED: "failed",
            Verdict.ERROR: f"raised {outcome.error_type or 'an exception'}",
            Verdict.RESOURCE_LIMIT: f"hit the {outcome.resource.value.replace('_', ' ')} limit",
        }[verdict]
        return result(verdict, f"{where} {what}", outcome)
    if records.program is None or not records.done:
        return result(Verdict.ERROR, _ended_early(end.exit_status, died_of))
    if any(o.status is TestStatus.NOT_RUN for o in outcomes):
        return result(Verdict.ERROR, "a test has no outcome")
    if end.exit_status != 0:
        return result(Verdict.ERROR, f"the process exited with status {end.exit_status}")
    return result(Verdict.PASSED, "every test passed" if tests else "the program ran")


def _test_outcome(outcome: Outcome | None, index: int) -> TestOutcome:
    if outcome is None:
        return TestOutcome(index, TestStatus.NOT_RUN)
    return TestOutcome(index, outcome.status, outcome.resource, outcome.error_type, outcome.detail)


def _first_failure(
    records: Records, outcomes: tuple[TestOutcome, ...]
) -> tuple[str, Outcome] | None:
    if records.program is not None and records.program.status is not TestStatus.PASSED:
        return "the program", records.program
    for test in outcomes:
        if test.status not in (TestStatus.PASSED, TestStatus.NOT_RUN):
            return f"test {test.index}", records.tests[test.index]
    return None


def _signal_of(exit_status: int | None) -> int | None:
    if exit_status is None or exit_status <= _SIGNAL_BASE or exit_status > _SIGNAL_BASE + 64:
        return None
    return exit_status - _SIGNAL_BASE


def _ended_early(exit_status: int | None, died_of: int | None) -> str:
    if died_of is not None:
        try:
            name = signal.Signals(died_of).name
        except ValueError:
            name = f"signal {died_of}"
        return f"the process died of {name} before its tests finished"
    return f"the process exited with status {exit_status} before its tests finished"
