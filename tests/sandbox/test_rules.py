"""The sandbox's pure parts: settings, the record channel, the verdict rules, the slots,
the seccomp filter's layout. No process is started here."""

import signal
import struct

import anyio
import pytest

from evald_server.sandbox import (
    MAX_TESTS,
    JobTooLarge,
    Resource,
    SandboxSettings,
    SandboxSlots,
    TestJob,
    TestStatus,
    Verdict,
)
from evald_server.sandbox._protocol import read_records
from evald_server.sandbox._seccomp import UnsupportedArchitecture, seccomp_filter
from evald_server.sandbox._verdicts import CapturedOutput, ProcessEnd, judge

NONCE = "ab" * 32
OUTPUT = CapturedOutput("", "", False, False)


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"slots": 0}, "sandbox.slots"),
        ({"cpu_seconds": 0}, "sandbox.cpu_seconds"),
        ({"wall_timeout_s": float("nan")}, "sandbox.wall_timeout_s"),
        ({"memory_bytes": 1024}, "sandbox.memory_bytes"),
        ({"processes": True}, "sandbox.processes"),
        ({"output_bytes": 64 << 20}, "sandbox.output_bytes"),
        ({"python": "python3"}, "sandbox.python"),
        ({"python": "/opt/py/bin/python3"}, "is not under any of sandbox.system_paths"),
        ({"system_paths": ("/usr", "/")}, "sandbox.system_paths"),
        ({"system_paths": ("/usr", "/tmp")}, "sandbox's own /tmp"),
        ({"system_paths": ("/usr", "/w/x")}, "sandbox's own /w"),
        ({"system_paths": ("/usr", "/usr/../etc")}, "not an absolute path"),
        ({"uid_base": 0}, "sandbox.uid_base"),
    ],
)
def test_settings_refuse_a_bad_value_naming_the_key(changes: dict[str, object], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(".", r"\.")):
        SandboxSettings(**changes)  # type: ignore[arg-type]


def test_settings_defaults_are_off_and_each_slot_has_its_own_uid() -> None:
    settings = SandboxSettings()
    assert settings.enabled is False
    assert [settings.slot_uid(i) for i in range(settings.slots)] == [
        settings.uid_base,
        settings.uid_base + 1,
    ]


def test_a_job_beyond_its_bounds_is_refused() -> None:
    with pytest.raises(JobTooLarge, match="tests exceed"):
        TestJob("pass", ("assert 1",) * (MAX_TESTS + 1))
    with pytest.raises(JobTooLarge, match="program exceeds"):
        TestJob("#" * (5 << 20))


def _line(*fields: object, nonce: str = NONCE) -> bytes:
    import json

    return f"{nonce} {json.dumps(list(fields))}\n".encode()


def test_only_lines_with_the_nonce_count_and_each_is_validated() -> None:
    data = b"".join(
        [
            _line("started", -1, "", "", "", ""),
            _line("program", -1, "passed", "", "", ""),
            _line("test", 0, "passed", "", "", "", nonce="cd" * 32),  # another nonce
            b'passed\n["test", 0, "passed", "", "", ""]\n',  # no nonce at all
            _line("test", 0, "failed", "", "AssertionError", "tb"),
            _line("test", 0, "passed", "", "", ""),  # a second outcome for test 0
            _line("test", 7, "passed", "", "", ""),  # no such test
            _line("test", 1, "passed", "bogus", "", ""),  # unknown resource
            NONCE.encode() + b' ["test", 1, "pas',  # cut short
        ]
    )
    records = read_records(data, nonce=NONCE, tests=2)
    assert records.started
    assert not records.done
    assert records.program is not None
    assert records.program.status is TestStatus.PASSED
    assert set(records.tests) == {0}
    assert records.tests[0].status is TestStatus.FAILED
    assert records.unauthenticated == 3  # the other nonce, "passed", the bare array
    assert records.malformed == 4


def _records(*lines: bytes, tests: int = 1) -> object:
    return read_records(b"".join(lines), nonce=NONCE, tests=tests)


STARTED = _line("started", -1, "", "", "", "")
PROGRAM_OK = _line("program", -1, "passed", "", "", "")
TEST_OK = _line("test", 0, "passed", "", "", "")
DONE = _line("done", -1, "", "", "", "")


def _judge(records: object, exit_status: int | None = 0, *, timed_out: bool = False) -> object:
    return judge(
        records,  # type: ignore[arg-type]
        ProcessEnd(exit_status, timed_out, 0.1),
        OUTPUT,
        tests=1,
        wall_timeout_s=10,
        cpu_seconds=5,
    )


def test_passed_needs_every_pass_the_done_record_and_exit_status_zero() -> None:
    full = _records(STARTED, PROGRAM_OK, TEST_OK, DONE)
    assert _judge(full).verdict is Verdict.PASSED  # type: ignore[attr-defined]
    # os._exit(0) after the tests passed but before the harness said done
    early = _judge(_records(STARTED, PROGRAM_OK, TEST_OK))
    assert early.verdict is Verdict.ERROR  # type: ignore[attr-defined]
    assert "before its tests finished" in early.reason  # type: ignore[attr-defined]
    # done, but the process did not exit with 0
    assert _judge(full, 1).verdict is Verdict.ERROR  # type: ignore[attr-defined]
    # done without the test's outcome
    missing = _judge(_records(STARTED, PROGRAM_OK, DONE))
    assert missing.verdict is Verdict.ERROR  # type: ignore[attr-defined]
    assert missing.tests[0].status is TestStatus.NOT_RUN  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("exit_status", "timed_out", "verdict", "resource"),
    [
        (None, True, Verdict.TIMEOUT, Resource.NONE),
        (128 + signal.SIGXCPU, False, Verdict.TIMEOUT, Resource.CPU),
        (128 + signal.SIGKILL, False, Verdict.RESOURCE_LIMIT, Resource.KILLED),
        (128 + signal.SIGXFSZ, False, Verdict.RESOURCE_LIMIT, Resource.FILE_SIZE),
        (128 + signal.SIGSEGV, False, Verdict.ERROR, Resource.NONE),
        (0, False, Verdict.ERROR, Resource.NONE),
    ],
)
def test_how_the_process_ended_decides_before_the_records(
    exit_status: int | None, timed_out: bool, verdict: Verdict, resource: Resource
) -> None:
    # The records say every test passed, but not done: the end decides.
    result = _judge(_records(STARTED, PROGRAM_OK, TEST_OK), exit_status, timed_out=timed_out)
    assert result.verdict is verdict  # type: ignore[attr-defined]
    assert result.resource is resource  # type: ignore[attr-defined]


def test_the_first_outcome_that_is_not_a_pass_decides() -> None:
    lines = [
        STARTED,
        PROGRAM_OK,
        _line("test", 0, "passed", "", "", ""),
        _line("test", 1, "resource", "memory", "MemoryError", "tb1"),
        _line("test", 2, "failed", "", "AssertionError", "tb2"),
        DONE,
    ]
    result = judge(
        _records(*lines, tests=3),  # type: ignore[arg-type]
        ProcessEnd(0, False, 0.1),
        OUTPUT,
        tests=3,
        wall_timeout_s=10,
        cpu_seconds=5,
    )
    assert result.verdict is Verdict.RESOURCE_LIMIT
    assert result.resource is Resource.MEMORY
    assert result.reason == "test 1 hit the memory limit"
    assert result.detail == "tb1"
    assert [t.status for t in result.tests] == [
        TestStatus.PASSED,
        TestStatus.RESOURCE_LIMIT,
        TestStatus.FAILED,
    ]
    program_error = _judge(
        _records(STARTED, _line("program", -1, "error", "", "NameError", "tb"), DONE)
    )
    assert program_error.verdict is Verdict.ERROR  # type: ignore[attr-defined]
    assert program_error.reason == "the program raised NameError"  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_slots_are_first_come_first_served_with_statistics() -> None:
    slots = SandboxSlots(2)
    first, second = slots.try_acquire(), slots.try_acquire()
    assert {first, second} == {0, 1}
    assert slots.try_acquire() is None
    order: list[int] = []

    async def waiter(tag: int) -> None:
        slot = await slots.acquire()
        order.append(tag)
        slots.release(slot)

    async with anyio.create_task_group() as group:
        group.start_soon(waiter, 1)
        group.start_soon(waiter, 2)
        await anyio.wait_all_tasks_blocked()
        stats = slots.stats()
        assert (stats.name, stats.capacity, stats.in_use, stats.waiting) == (
            "sandbox.slots",
            2,
            2,
            2,
        )
        assert first is not None
        slots.release(first)
    assert order == [1, 2]
    assert slots.stats().in_use == 1


@pytest.mark.anyio
async def test_a_cancelled_waiter_leaves_no_slot_behind() -> None:
    slots = SandboxSlots(1)
    held = slots.try_acquire()
    assert held is not None
    with anyio.move_on_after(0.05):
        await slots.acquire()
    assert slots.stats().waiting == 0
    slots.release(held)
    assert slots.try_acquire() == held


def test_the_seccomp_filter_checks_the_architecture_first_and_ends_allow_then_deny() -> None:
    program = seccomp_filter("x86_64")
    instructions = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    assert instructions[0] == (0x20, 0, 0, 4)  # load arch
    assert instructions[1][3] == 0xC000003E
    assert instructions[-2] == (0x06, 0, 0, 0x7FFF0000)  # allow
    assert instructions[-1][3] == 0x00050000 | 1  # errno EPERM
    # every jump to "deny" lands on the last instruction
    for index, (code, jt, jf, _k) in enumerate(instructions):
        if code in (0x15, 0x35) and index > 1:
            assert index + 1 + jt == len(instructions) - 1
            assert jf == 0
    assert instructions[1][2] + 2 == len(instructions) - 1  # a foreign ABI: deny
    with pytest.raises(UnsupportedArchitecture):
        seccomp_filter("sparc64")


def test_public_surfaces() -> None:
    from evald_server import code_tasks, sandbox

    assert sorted(sandbox.__all__) == sorted(
        [
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
    )
    assert sorted(code_tasks.__all__) == sorted(
        [
            "MAX_ANSWER_CHARS",
            "MAX_ENTRY_POINT_CHARS",
            "MAX_SOURCE_CHARS",
            "MAX_TEXT_CHARS",
            "PYTHON_TAGS",
            "CodeProblem",
            "CodeRecord",
            "ExtractedCode",
            "ExtractionRule",
            "ProblemStyle",
            "code_problem",
            "evaluate_answer",
            "extract_code",
            "program_of",
            "test_job",
        ]
    )
