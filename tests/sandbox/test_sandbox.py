"""The sandbox on this machine: real bubblewrap, the real harness, real limits."""

import os

import anyio
import pytest

from evald_server.sandbox import (
    Sandbox,
    SandboxError,
    SandboxSettings,
    TestJob,
    TestStatus,
    Verdict,
    check_sandbox,
)
from tests._shared import wait_for
from tests.sandbox._support import SETTINGS, SHORT_WALL_S, require_sandbox, sandbox

pytestmark = pytest.mark.anyio


async def test_tests_run_one_by_one_after_the_program_each_with_its_outcome() -> None:
    program = "def add(a, b):\n    return a + b if a != 3 else b.upper()\n"
    tests = ("assert add(1, 2) == 3", "assert add(2, 2) == 5", "assert add(3, 1) == 4")
    result = await sandbox().run(TestJob(program, tests))
    assert result.verdict is Verdict.FAILED
    assert result.reason == "test 1 failed"
    assert [t.status for t in result.tests] == [
        TestStatus.PASSED,
        TestStatus.FAILED,
        TestStatus.ERROR,
    ]
    assert result.tests[2].error_type == "AttributeError"
    assert 'File "<program>", line 2, in add' in result.tests[2].detail
    assert "<string>" not in result.tests[2].detail  # the harness's own frames are left out
    assert result.exit_status == 0


async def test_all_tests_passing_is_a_pass() -> None:
    result = await sandbox().run(TestJob("x = 41\n", ("assert x + 1 == 42", "assert x > 0")))
    assert result.verdict is Verdict.PASSED
    assert result.passed
    assert all(t.status is TestStatus.PASSED for t in result.tests)


async def test_an_error_keeps_only_the_last_lines_of_its_traceback() -> None:
    program = "def down(n):\n    return 1 / 0 if n == 0 else down(n - 1)\ndown(50)\n"
    result = await sandbox().run(TestJob(program))
    assert result.verdict is Verdict.ERROR
    assert result.reason == "the program raised ZeroDivisionError"
    lines = result.detail.splitlines()
    assert 3 < len(lines) <= SETTINGS.traceback_lines  # 50 frames, "[Previous line repeated]"
    assert lines[-1] == "ZeroDivisionError: division by zero"


async def test_the_program_runs_as_an_unprivileged_uid_in_its_own_namespaces() -> None:
    tests = (
        "import os, socket\nassert os.getuid() == 1000 and os.getgid() == 1000",
        "assert os.getpid() == 1  # the harness is its pid namespace's init",
        "assert socket.gethostname() == 'evald-sandbox'",
        "assert [name for _, name in socket.if_nameindex()] == ['lo']",
        "assert os.getcwd() == '/w' and os.environ['HOME'] == '/w'",
        "assert __name__ == '__program__'",
        "assert input.__module__ == 'builtins'\ntry:\n    input()\nexcept EOFError:\n    pass",
    )
    result = await sandbox().run(TestJob("", tests))
    assert result.verdict is Verdict.PASSED, (result.reason, result.detail)


async def test_only_the_system_paths_are_visible_and_read_only() -> None:
    tests = (
        "import os\nassert sorted(os.listdir('/')) == "
        "['bin', 'dev', 'lib', 'lib64', 'sbin', 'tmp', 'usr', 'w']",
        "try:\n    open('/usr/evald-probe', 'w')\nexcept OSError as e:\n    assert e.errno == 30",
        "try:\n    open('/dev/evald-probe', 'w')\nexcept OSError as e:\n    assert e.errno == 30",
        "open('/tmp/x', 'w').write('tmp is writable')\nassert os.path.exists('/w/tmp/x')",
        "open('/dev/shm/x', 'w').write('so is /dev/shm')",
    )
    result = await sandbox().run(TestJob("", tests))
    assert result.verdict is Verdict.PASSED, (result.reason, result.detail)


async def test_output_is_kept_bounded_and_invalid_utf8_is_replaced() -> None:
    program = (
        "import sys\n"
        "sys.stdout.buffer.write(b'\\xff\\xfe not utf-8 ')\n"
        "print('x' * 10000)\n"
        "print('to stderr', file=sys.stderr)\n"
    )
    result = await sandbox().run(TestJob(program))
    assert result.verdict is Verdict.PASSED
    assert result.output.stdout.startswith("\ufffd\ufffd not utf-8 xxx")
    # output_bytes of what it wrote, two bytes of which became U+FFFD (3 bytes each)
    assert len(result.output.stdout.encode()) == SETTINGS.output_bytes + 4
    assert result.output.stdout_truncated
    assert result.output.stderr == "to stderr\n"
    assert not result.output.stderr_truncated


async def test_the_wall_clock_deadline_ends_a_sleeping_program() -> None:
    result = await sandbox(wall_timeout_s=SHORT_WALL_S).run(
        TestJob("import time\ntime.sleep(3600)\n", ("assert True",))
    )
    assert result.verdict is Verdict.TIMEOUT
    assert result.reason == f"wall-clock deadline ({SHORT_WALL_S:g} s)"
    assert result.tests[0].status is TestStatus.NOT_RUN
    assert result.exit_status is None


async def test_outcomes_before_the_deadline_are_kept() -> None:
    tests = ("assert 1 == 1", "assert 1 == 2", "import time\ntime.sleep(3600)")
    result = await sandbox(wall_timeout_s=SHORT_WALL_S).run(TestJob("", tests))
    assert result.verdict is Verdict.TIMEOUT
    assert [t.status for t in result.tests] == [
        TestStatus.PASSED,
        TestStatus.FAILED,
        TestStatus.NOT_RUN,
    ]


async def test_slots_bound_the_programs_running_at_once() -> None:
    box = sandbox(slots=2, wall_timeout_s=SHORT_WALL_S)
    sleeper = TestJob("import time\ntime.sleep(3600)\n")
    results = []

    async def run() -> None:
        results.append(await box.run(sleeper))

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(run)

        async def two_running_one_waiting() -> bool:
            stats = box.stats()
            return stats.in_use == 2 and stats.waiting == 1

        await wait_for(two_running_one_waiting)
    assert [r.verdict for r in results] == [Verdict.TIMEOUT] * 3
    assert box.stats().in_use == 0


async def test_a_cancelled_run_leaves_no_process_behind() -> None:
    from tests.sandbox._support import processes_of_uids, slot_uids

    box = sandbox(slots=1)
    with anyio.move_on_after(3):
        await box.run(TestJob("import time\ntime.sleep(3600)\n"))
    assert processes_of_uids(slot_uids()) == []
    assert box.stats().in_use == 0
    assert (await box.run(TestJob("x = 1", ("assert x == 1",)))).passed


async def test_check_says_it_works_here_and_names_what_is_missing_elsewhere() -> None:
    require_sandbox()
    check = await check_sandbox(SETTINGS)
    assert check.available, check.message
    missing = await check_sandbox(SandboxSettings(bwrap="/usr/bin/no-such-bwrap"))
    assert not missing.available
    assert "bubblewrap is missing: no executable /usr/bin/no-such-bwrap" in missing.message


async def test_a_sandbox_that_cannot_start_raises_rather_than_judging_the_program() -> None:
    # An "interpreter" that exits at once: the harness never starts.
    box = sandbox(python="/usr/bin/false")
    with pytest.raises(SandboxError, match="ended with status 1 before the harness started"):
        await box.run(TestJob("pass"))
    check = await box.check()
    assert not check.available
    assert "the code sandbox cannot run" in check.message


async def test_the_servers_environment_is_not_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALD_TEST_API_KEY", "sk-secret-in-the-server-environment")
    assert os.environ["EVALD_TEST_API_KEY"]
    tests = (
        "import os\nassert sorted(os.environ) == ['HOME', 'LANG', 'PATH', 'PWD', 'TMPDIR']",
        "assert not os.path.exists('/proc/self/environ')",
        "assert not os.path.exists('/proc/1/environ')",
    )
    result = await sandbox().run(TestJob("import os\nprint(dict(os.environ))\n", tests))
    assert result.verdict is Verdict.PASSED, (result.reason, result.detail)
    assert "sk-secret" not in result.output.stdout


def test_run_in_slot_refuses_a_slot_it_does_not_have() -> None:
    box = Sandbox(SETTINGS)
    with pytest.raises(ValueError, match="slot 5"):
        anyio.run(box.run_in_slot, TestJob("pass"), 5)
