"""The code sandbox: model-written programs run against their tests, each in a fresh
bubblewrap sandbox, under resource limits and a wall-clock deadline.

``Sandbox(settings).run(TestJob(program, tests))`` waits for one of ``settings.slots``
slots and returns a ``SandboxResult``: a ``Verdict`` (passed, failed, error, timeout,
resource limit), per-test outcomes, the bounded start of stdout and stderr, and why.
``check_sandbox(settings)`` says whether sandboxing works on this machine, naming what
is missing when it does not; code never runs unsandboxed. What the sandbox guarantees,
and what it does not, is in docs/SANDBOX.md; each module documents its own part:
``_command`` (the namespaces, mounts and limits), ``_seccomp``, ``_harness`` (the
program's side and why it cannot forge its verdict), ``_protocol``, ``_verdicts``,
``_process`` (the subprocess and the deadline) and ``_slots``.
"""

from evald_server.sandbox._errors import SandboxError, SandboxUnavailable
from evald_server.sandbox._protocol import (
    MAX_PROGRAM_BYTES,
    MAX_TEST_BYTES,
    MAX_TESTS,
    MAX_TESTS_BYTES,
    JobTooLarge,
    Resource,
    TestJob,
    TestStatus,
)
from evald_server.sandbox._sandbox import (
    Sandbox,
    SandboxCheck,
    check_sandbox,
    missing_prerequisites,
)
from evald_server.sandbox._seccomp import DENIED_SYSCALLS
from evald_server.sandbox._settings import SandboxSettings
from evald_server.sandbox._slots import SLOTS_LIMIT, SandboxSlots, SlotStats
from evald_server.sandbox._verdicts import (
    CapturedOutput,
    SandboxResult,
    TestOutcome,
    Verdict,
    no_program_result,
)

__all__ = [
    "DENIED_SYSCALLS",
    "MAX_PROGRAM_BYTES",
    "MAX_TESTS",
    "MAX_TESTS_BYTES",
    "MAX_TEST_BYTES",
    "SLOTS_LIMIT",
    "CapturedOutput",
    "JobTooLarge",
    "Resource",
    "Sandbox",
    "SandboxCheck",
    "SandboxError",
    "SandboxResult",
    "SandboxSettings",
    "SandboxSlots",
    "SandboxUnavailable",
    "SlotStats",
    "TestJob",
    "TestOutcome",
    "TestStatus",
    "Verdict",
    "check_sandbox",
    "missing_prerequisites",
    "no_program_result",
]
