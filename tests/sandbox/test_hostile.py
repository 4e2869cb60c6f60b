"""Hostile programs: each ends as a graded verdict, and the test process is unaffected.

After the whole module (``_the_host_is_untouched``): no process of a sandbox slot's uid
is left, no file the programs tried to write exists on the host, and this process's
RSS grew by less than ``RSS_GROWTH_BOUND``.
"""

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from evald_server.sandbox import Resource, SandboxResult, TestJob, TestStatus, Verdict
from evald_server.sandbox._command import Fds, sandbox_command
from evald_server.sandbox._process import run_process
from evald_server.sandbox._protocol import encode_job, new_nonce, read_records
from evald_server.sandbox._seccomp import seccomp_filter
from tests.sandbox._corpus import (
    BACKGROUND_PROCESS,
    FILL_THE_TMPFS,
    FORK_BOMB,
    INFINITE_LOOP,
    INVALID_UTF8,
    MARKER,
    MEMORY_BOMB,
    OPEN_100000_FILES,
    PRINT_A_GIGABYTE,
    PRINTS_PASSED,
    SLEEP_PAST_THE_DEADLINE,
    TEN_GB_FILE,
    WRONG,
    connect_to,
    kill_parent_and_others,
    read_secrets,
)
from tests.sandbox._support import (
    SETTINGS,
    SHORT_WALL_S,
    processes_of_uids,
    require_sandbox,
    sandbox,
    slot_uids,
)

pytestmark = pytest.mark.anyio
RSS_GROWTH_BOUND = 64 << 20
HOST_DIRS = (Path("/tmp"), Path("/root"), Path.cwd())


def _markers() -> set[Path]:
    found: set[Path] = set()
    for directory in HOST_DIRS:
        if directory.is_dir():
            found |= {p for p in directory.iterdir() if MARKER in p.name}
    return found


@pytest.fixture(scope="module", autouse=True)
def _the_host_is_untouched() -> Iterator[None]:
    require_sandbox()
    before_files = _markers()
    me = psutil.Process()
    rss_before = me.memory_info().rss
    yield
    assert processes_of_uids(slot_uids()) == [], "a sandbox process outlived its sample"
    assert _markers() == before_files, "a program wrote a file outside its sandbox"
    assert me.memory_info().rss - rss_before < RSS_GROWTH_BOUND


async def _run(program: str, *tests: str, **changes: object) -> SandboxResult:
    return await sandbox(**changes).run(TestJob(program, tests))


# -- resources -----------------------------------------------------------------------


async def test_a_fork_bomb_stops_at_the_process_limit() -> None:
    result = await _run(FORK_BOMB)
    assert result.verdict is Verdict.RESOURCE_LIMIT
    assert result.resource is Resource.PROCESSES
    # processes counts the harness's two threads: the program gets the rest, not one more
    assert int(result.output.stdout) == SETTINGS.processes - 2


async def test_without_the_slots_own_uid_root_is_not_bounded_by_rlimit_nproc() -> None:
    """Why each slot has its own uid: the same fork bomb, started by root without the
    drop to the slot's uid, is not stopped by RLIMIT_NPROC (root is exempt)."""
    require_sandbox()
    settings = SETTINGS
    nonce = new_nonce()
    program = FORK_BOMB.replace("10_000", str(3 * settings.processes))

    def build(result_fd: int, fds: Fds) -> tuple[list[str], bytes]:
        command = sandbox_command(
            settings,
            slot=0,
            mounts=sandbox()._mounts,
            fds=fds,
            harness=sandbox()._harness,
            drop_to_slot_uid=False,
        )
        job = encode_job(
            TestJob(program),
            nonce=nonce,
            result_fd=result_fd,
            trusted_prefixes=settings.system_paths,
            traceback_lines=settings.traceback_lines,
        )
        return command, job

    finished = await run_process(
        build, seccomp=seccomp_filter(), wall_timeout_s=60, output_bytes=4096
    )
    assert read_records(finished.result, nonce=nonce, tests=0).done
    assert int(finished.stdout) == 3 * settings.processes  # every fork succeeded


async def test_a_memory_bomb_hits_the_memory_limit() -> None:
    result = await _run(MEMORY_BOMB)
    assert result.verdict is Verdict.RESOURCE_LIMIT
    assert result.resource is Resource.MEMORY


async def test_an_infinite_loop_times_out() -> None:
    result = await _run(INFINITE_LOOP, wall_timeout_s=30)
    assert result.verdict is Verdict.TIMEOUT
    assert result.resource is Resource.CPU  # the CPU limit (2 s) ends it before the wall


async def test_sleeping_past_the_deadline_times_out() -> None:
    result = await _run(SLEEP_PAST_THE_DEADLINE, wall_timeout_s=SHORT_WALL_S)
    assert result.verdict is Verdict.TIMEOUT
    assert result.reason.startswith("wall-clock deadline")


async def test_a_10_gb_file_stops_at_the_file_size_limit() -> None:
    result = await _run(TEN_GB_FILE)
    assert result.verdict is Verdict.RESOURCE_LIMIT
    assert result.resource is Resource.FILE_SIZE


async def test_many_files_fill_the_tmpfs_and_stop_there() -> None:
    result = await _run(FILL_THE_TMPFS)
    assert result.verdict is Verdict.RESOURCE_LIMIT
    assert result.resource is Resource.DISK


async def test_opening_100000_files_stops_at_the_open_files_limit() -> None:
    result = await _run(OPEN_100000_FILES)
    assert result.verdict is Verdict.RESOURCE_LIMIT
    assert result.resource is Resource.OPEN_FILES


async def test_printing_a_gigabyte_is_cut_and_kept_bounded() -> None:
    result = await _run(PRINT_A_GIGABYTE)
    assert result.verdict is Verdict.RESOURCE_LIMIT  # stdout is a file: RLIMIT_FSIZE
    assert result.resource is Resource.FILE_SIZE
    assert result.output.stdout_truncated
    assert result.output.stdout == "y" * SETTINGS.output_bytes


async def test_invalid_utf8_on_both_streams_is_replaced() -> None:
    result = await _run(INVALID_UTF8)
    assert result.verdict is Verdict.PASSED
    assert result.output.stdout == "\ufffd(\ufffd"
    assert result.output.stderr == "\ufffd"


# -- what the program may see ----------------------------------------------------------


async def test_the_servers_config_store_and_other_tenants_files_are_unreachable(
    tmp_path: Path,
) -> None:
    secret = "evald-secret-7f3a"
    config = tmp_path / "evald.toml"
    store = tmp_path / "evald.sqlite3"
    tenant = tmp_path / "tenant-b" / "dataset.jsonl"
    tenant.parent.mkdir()
    for path in (config, store, tenant):
        path.write_text(f"api_key = '{secret}'\n")
    paths = [str(config), str(store), str(tenant), "/etc/passwd", "/etc/shadow", "/root/.bashrc"]
    program = read_secrets(paths, secret)
    result = await _run(program, wall_timeout_s=60)
    assert result.verdict is Verdict.PASSED, (result.reason, result.detail)
    assert secret not in result.output.stdout + result.output.stderr


async def test_a_samples_work_dir_is_its_own() -> None:
    box = sandbox()
    leave = (
        f"for d in ['/w', '/tmp', '/dev/shm']:\n"
        f"    open(d + '/{MARKER}', 'w').write('left by an earlier sample')\n"
    )
    assert (await box.run(TestJob(leave))).passed
    look = (
        "import os\n"
        "assert os.listdir('/w') == ['tmp'], os.listdir('/w')\n"
        "assert os.listdir('/tmp') == [] and os.listdir('/dev/shm') == []\n"
    )
    for _ in range(2):  # each slot in turn: the same uid finds nothing of the earlier run
        result = await box.run(TestJob(look))
        assert result.verdict is Verdict.PASSED, (result.reason, result.detail)


async def test_no_connection_leaves_the_sandbox(unused_tcp_port: int) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", unused_tcp_port))
    listener.listen(8)
    listener.setblocking(False)
    try:
        program = connect_to([unused_tcp_port])
        result = await _run(program)
        assert result.verdict is Verdict.PASSED, (result.reason, result.detail)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever arrived
    finally:
        listener.close()


@pytest.fixture
def unused_tcp_port() -> int:
    from tests._shared import free_port

    return free_port()


async def test_killing_its_parent_or_others_hurts_no_one_outside() -> None:
    program = kill_parent_and_others([os.getpid(), os.getppid()])
    result = await _run(program, "assert True")
    assert result.verdict is Verdict.PASSED, (result.reason, result.detail)  # kill(-1) spares init
    assert psutil.pid_exists(os.getpid())
    assert psutil.pid_exists(os.getppid())


async def test_background_processes_do_not_outlive_the_sample() -> None:
    result = await _run(BACKGROUND_PROCESS)
    assert result.verdict is Verdict.PASSED, (result.reason, result.detail)
    assert processes_of_uids(slot_uids()) == []


# -- forging a verdict ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("trick", "verdict"),
    [
        (PRINTS_PASSED, Verdict.FAILED),
        ("import os\nos._exit(0)", Verdict.ERROR),
        ("import sys\nsys.exit(0)", Verdict.ERROR),
        ("raise SystemExit(0)", Verdict.ERROR),
        ("import builtins\nbuiltins.AssertionError = type('A', (Exception,), {})", Verdict.FAILED),
        ("import builtins\nbuiltins.abs = lambda x: 0", Verdict.FAILED),
        ("__builtins__['abs'] = lambda x: 0", Verdict.FAILED),
        ("import __main__\n__main__.PASSED, __main__.FAILED = 'failed', 'passed'", Verdict.FAILED),
        ("import __main__\n__main__._describe = None\n__main__._classify = None", Verdict.FAILED),
        ("import __main__\n__main__.BaseException = KeyError", Verdict.FAILED),
        ("import json\njson.dumps = lambda *a, **k: '[\"passed\"]'", Verdict.FAILED),
    ],
)
async def test_tricks_in_the_program_do_not_pass_a_wrong_solution(
    trick: str, verdict: Verdict
) -> None:
    tests = ("assert solve(1) == 3", "assert abs(solve(1) - 3) < 1e-9")
    result = await _run(f"{WRONG}{trick}\n", *tests)
    assert result.verdict is verdict, (result.reason, result.detail)
    # not one test passes, the one that calls abs() included
    assert all(t.status is not TestStatus.PASSED for t in result.tests), result.tests


async def test_exiting_from_inside_the_tests_is_not_a_pass() -> None:
    program = "import os, sys\ndef solve(x):\n    os._exit(0)\n"
    result = await _run(program, "assert solve(1) == 3")
    assert result.verdict is Verdict.ERROR
    program = "import sys\ndef solve(x):\n    sys.exit(0)\n"
    result = await _run(program, "assert solve(1) == 3")
    assert result.verdict is Verdict.ERROR
    assert result.error_type == "SystemExit"


async def test_records_written_by_the_program_are_not_believed() -> None:
    fake = (
        "import os\n"
        "for fd in range(3, 32):\n"
        "    for nonce in ['', '0' * 64, 'x']:\n"
        '        line = nonce + \' ["test", 0, "passed", "", "", ""]\\n\'\n'
        '        line += nonce + \' ["done", -1, "", "", "", ""]\\n\'\n'
        "        try:\n"
        "            os.write(fd, line.encode())\n"
        "        except OSError:\n"
        "            pass\n"
    )
    result = await _run(WRONG + fake, "assert solve(1) == 3")
    assert result.verdict is Verdict.FAILED
    assert result.unauthenticated_records > 0  # it found the channel, not the nonce


@pytest.mark.parametrize(
    "reach",
    [
        "import sys\nsys._getframe(1)",
        "import inspect\ninspect.stack()",
        "try:\n    raise ValueError\nexcept ValueError as e:\n    e.__traceback__.tb_frame",
        "import gc\ngc.get_objects()",
        "import gc, sys\ngc.get_referrers(sys.modules['__main__'])",
        "import sys\nsys.settrace(lambda *a: None)",
        "import sys\nsys.setprofile(lambda *a: None)",
        "import threading\nthreading.settrace(print)\nthreading.Thread(target=int).start()\n"
        "import sys\nsys.settrace(print)",
        "import sys\nsys._current_frames()",
        "def g():\n    yield 1\ng().gi_frame",
        "import ctypes",
        "import importlib.machinery, importlib.util, glob\n"
        "path = glob.glob('/usr/lib/python3*/lib-dynload/_ctypes*.so')[0]\n"
        "spec = importlib.util.spec_from_loader('x._ctypes', "
        "importlib.machinery.ExtensionFileLoader('x._ctypes', path))\n"
        "importlib.util.module_from_spec(spec)",
        "import marshal\nmarshal.loads(marshal.dumps((lambda: 0).__code__))",
        "(lambda: 0).__code__.replace(co_consts=(1,))",
        "import _imp, marshal\n_imp.get_frozen_object('os', marshal.dumps((lambda: 0).__code__))",
        "import signal\nsignal.signal(signal.SIGALRM, lambda *a: None)",
        "import _signal\n_signal.signal(14, lambda *a: None)",
        "import _xxsubinterpreters",
        "f = lambda: 0\nf.__code__ = (lambda: 1).__code__",
    ],
)
async def test_every_way_to_the_harnesss_frames_and_memory_is_refused(reach: str) -> None:
    result = await _run(reach)
    assert result.verdict is Verdict.ERROR, (reach, result.reason, result.detail)
    # ValueError from the audit hook (SystemError where C code turns it into one), or
    # AttributeError: signal.signal is gone
    assert result.error_type in ("ValueError", "SystemError", "AttributeError")


async def test_no_process_can_trace_or_read_another() -> None:
    """ptrace and process_vm_readv from a fresh interpreter (no audit hook there) on
    its parent, the harness: the seccomp filter refuses both."""
    attack = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "attach = libc.ptrace(16, os.getppid(), 0, 0)\n"
        "attach_errno = ctypes.get_errno()\n"
        "buf = ctypes.create_string_buffer(64)\n"
        "class iovec(ctypes.Structure):\n"
        "    _fields_ = [('base', ctypes.c_void_p), ('len', ctypes.c_size_t)]\n"
        "local = iovec(ctypes.addressof(buf), 64)\n"
        "remote = iovec(0x400000, 64)\n"
        "read = libc.process_vm_readv(\n"
        "    os.getppid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)\n"
        "print(attach, attach_errno, read, ctypes.get_errno())\n"
    )
    program = (
        "import subprocess, sys\n"
        f"out = subprocess.run([sys.executable, '-I', '-c', {attack!r}],\n"
        "                     capture_output=True, text=True)\n"
        "print(out.stdout, out.stderr)\n"
        "ATTACK = out.stdout.split()\n"
    )
    result = await _run(program, "assert ATTACK == ['-1', '1', '-1', '1'], ATTACK")  # EPERM
    assert result.verdict is Verdict.PASSED, (result.reason, result.detail, result.output)


async def test_a_program_with_a_legitimate_use_of_the_standard_library_still_runs() -> None:
    """The guards refuse introspection, not ordinary code: typing, namedtuple, enum,
    dataclasses, threads and subprocesses work."""
    program = (
        "import collections, dataclasses, enum, fractions, json, re, subprocess, sys, typing\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "Point = collections.namedtuple('Point', 'x y')\n"
        "T = typing.TypeVar('T')\n"
        "class Color(enum.Enum):\n    RED = 1\n"
        "@dataclasses.dataclass\nclass D:\n    a: int\n"
        "with ThreadPoolExecutor(2) as pool:\n"
        "    squares = list(pool.map(lambda v: v * v, range(4)))\n"
        "echo = subprocess.run(['echo', 'hi'], capture_output=True, text=True).stdout\n"
    )
    tests = (
        "assert Point(1, 2).y == 2 and Color.RED.value == 1 and D(3).a == 3",
        "assert squares == [0, 1, 4, 9] and echo == 'hi\\n'",
        "assert fractions.Fraction(1, 3) * 3 == 1",
    )
    result = await _run(program, *tests)
    assert result.verdict is Verdict.PASSED, (result.reason, result.detail)
    assert all(t.status is TestStatus.PASSED for t in result.tests)
