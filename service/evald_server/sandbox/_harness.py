"""The harness: runs a program and then its tests inside the sandbox, and reports each
outcome on a channel that the program cannot forge.

The host runs this file's source under the sandbox's interpreter
(``python -I -B -c <source>``); it is never imported by the server and uses only the
standard library. The host writes one JSON job on stdin::

    {"nonce": hex, "result_fd": int, "program": str, "tests": [str, ...],
     "trusted_prefixes": [path, ...], "traceback_lines": int, "detail_chars": int}

and reads records on ``result_fd`` (a pipe), one per line: ``<nonce> <JSON array>``,
the array ``[kind, index, status, resource, type, detail]`` with kind ``started``,
``program`` (index -1), ``test`` (index i) or ``done``. The host trusts only lines that
begin with the nonce, and passes a sample only on ``done`` after every test passed.

Why the program cannot forge a record: the nonce lives only in a local variable of
``main`` on the main thread, which never runs a line of the program. The program and
its tests run on a second thread (``_thread``: no ``threading.Thread`` object points at
it) that hands each outcome to ``main`` through a ``SimpleQueue``; both threads work
with references taken before the program starts, so rebinding a builtin, a module
attribute or this module's globals changes nothing they call. To read ``main``'s locals
the program would need a frame or the object graph, and an audit hook (which cannot be
removed) refuses every way to one: ``sys._getframe``, ``sys._current_frames``,
``tb_frame``/``gi_frame``/``cr_frame``/``ag_frame``, trace and profile functions,
``gc.get_objects``/``get_referrers``/``get_referents``, new code objects
(``code.__new__``, ``marshal.loads`` except of the interpreter's own ``.pyc`` files),
replacing a function's ``__code__``, and loading ``ctypes``, the C test modules or
sub-interpreters. Python signal handlers receive the interrupted frame, so
``signal.signal`` is removed before the program starts (SIGINT is ignored, so
``_thread.interrupt_main`` does nothing). Another process cannot read this one's
memory: the sandbox's seccomp filter refuses ``ptrace`` and its relatives. Each test
runs with a fresh copy of the builtins, so a program that rebinds ``abs`` or ``isinstance``
changes nothing for the tests. What stays open is in docs/SANDBOX.md.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # the typing module is not imported at run time (start-up cost)
if TYPE_CHECKING:
    from collections.abc import Callable
    from io import StringIO
    from typing import Any

# Statuses and resources, as the host's protocol module reads them.
PASSED = "passed"
FAILED = "failed"  # an AssertionError in a test
ERROR = "error"  # any other exception
RESOURCE = "resource"  # an exception that says a limit was hit; see ``resource``
EXIT_BAD_JOB = 70  # the job on stdin could not be read: the host's fault, not the program's
MAX_JOB_BYTES = 64 << 20
PROGRAM_MODULE = "__program__"  # the program's module name (its __name__)
WAKE_S = 0.05  # the main thread's longest wait before it runs pending signal handlers
_DENIED_EVENTS = frozenset(
    {
        "sys._getframe",
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.settrace",
        "sys.setprofile",
        "sys._settraceallthreads",
        "sys._setprofileallthreads",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "code.__new__",
        "marshal.load",
        "cpython.PyInterpreterState_New",
    }
)
_DENIED_PREFIXES = ("ctypes.", "sys.monitoring")
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_DENIED_MODULES = frozenset(
    {
        "ctypes",
        "_ctypes",
        "_testcapi",
        "_testinternalcapi",
        "_testbuffer",
        "_testmultiphase",
        "_testsinglephase",
        "_testimportmultiple",
        "_xxsubinterpreters",
        "_xxinterpchannels",
        "_interpreters",
        "_interpchannels",
        "_interpqueues",
        "_xxtestfuzz",
        "signal",  # loaded (and disarmed) before the program runs: never again
        "_signal",
    }
)
_PYC_HEADER = 16
_OWN_FRAME = '  File "<string>"'


def main() -> None:
    import _thread
    import builtins
    import io
    import json
    import os
    import signal
    from _json import encode_basestring_ascii as quote
    from _queue import Empty, SimpleQueue

    raw = bytearray()
    while len(raw) <= MAX_JOB_BYTES:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        raw += chunk
    try:
        job = json.loads(raw)
        nonce = str(job.pop("nonce"))
        result_fd = int(job["result_fd"])
        program = str(job["program"])
        tests = [str(test) for test in job["tests"]]
        prefixes = tuple(str(prefix).rstrip("/") + "/" for prefix in job["trusted_prefixes"])
        traceback_lines = int(job["traceback_lines"])
        detail_chars = int(job["detail_chars"])
    except (ValueError, KeyError, TypeError) as exc:
        os.write(2, f"evald harness: bad job: {exc!r}\n".encode())
        os._exit(EXIT_BAD_JOB)
    del raw, job

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.set_inheritable(result_fd, False)
    _load_frozen_modules()
    exit_now = os._exit
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The harness is its pid namespace's init, which ignores a signal it has no handler
    # for, RLIMIT_CPU's SIGXCPU included: end the process as that signal would.
    signal.signal(signal.SIGXCPU, lambda signum, frame: exit_now(128 + signum))
    del signal.signal
    import _signal  # type: ignore[import-not-found]

    del _signal.signal

    write = os.write

    def emit(kind: str, index: int, status: str, resource: str, kind_of: str, detail: str) -> None:
        line = (
            f"{nonce} [{quote(kind)},{index},{quote(status)},{quote(resource)},"
            f"{quote(kind_of)},{quote(detail)}]\n"
        )
        write(result_fd, line.encode("ascii"))

    tools = _Tools(
        exec_=exec,
        compile_=compile,
        builtins_=dict(vars(builtins)),
        copy_dict=dict.copy,
        stringio=io.StringIO,
        excepthook=sys.__excepthook__,
        sys_module=sys,
        describe=_describe,
        classify=_classify,
        traceback_lines=traceback_lines,
        detail_chars=detail_chars,
    )
    sys.addaudithook(_audit_hook(prefixes, os.open, os.read, os.close, _thread.get_ident))
    emit("started", -1, "", "", "", "")
    queue: SimpleQueue[Any] = SimpleQueue()
    get = queue.get
    empty, wake = Empty, WAKE_S
    _thread.start_new_thread(_run, (queue.put, program, tests, tools))
    del program, tests, tools
    while True:
        try:  # wake now and then: only the main thread runs signal handlers (SIGXCPU)
            item = get(True, wake)
        except empty:
            continue
        if item is None:
            break
        emit(*item)
    emit("done", -1, "", "", "", "")
    exit_now(0)


def _load_frozen_modules() -> None:
    """Import the standard library's frozen modules that are not loaded yet: a frozen
    module is unmarshalled from bytes that are no ``.pyc`` file, which the audit hook
    refuses once the program runs."""
    import _imp

    names = getattr(_imp, "_frozen_module_names", lambda: ())
    for name in names():
        if not name.startswith("__") and name not in sys.modules:
            __import__(name)


class _Tools:
    """What the worker thread uses, taken before the program runs (``__slots__``: no
    instance dict to rebind through)."""

    __slots__ = (
        "builtins_",
        "classify",
        "compile_",
        "copy_dict",
        "describe",
        "detail_chars",
        "excepthook",
        "exec_",
        "stringio",
        "sys_module",
        "traceback_lines",
    )
    builtins_: dict[str, Any]
    classify: Callable[[BaseException], str]
    compile_: Callable[..., Any]
    copy_dict: Callable[[dict[str, Any]], dict[str, Any]]
    describe: Callable[[BaseException, _Tools], tuple[str, str]]
    detail_chars: int
    excepthook: Callable[..., Any]
    exec_: Callable[..., Any]
    stringio: Callable[[], StringIO]
    sys_module: Any  # the sys module
    traceback_lines: int

    def __init__(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)


def _run(put: Callable[[Any], None], program: str, tests: list[str], tools: _Tools) -> None:
    """The worker thread: the program, then each test in a fresh copy of the builtins.

    Everything that decides a status is bound here before the program runs: a global
    of this module, a builtin or a module attribute that the program rebinds is never
    looked up on that path again (``describe`` and ``classify`` only name things)."""
    emit = put
    exec_ = tools.exec_
    compile_ = tools.compile_
    copy_dict = tools.copy_dict
    builtins_ = tools.builtins_
    describe = tools.describe
    classify = tools.classify
    flush = _flush
    base_exception = BaseException
    assertion_error = AssertionError
    passed_status, failed_status, error_status, resource_status = PASSED, FAILED, ERROR, RESOURCE
    count = len(tests)
    # A module of its own, as a script's __main__ is (dataclasses and pickle look a
    # class's module up in sys.modules), but not named __main__: an answer's
    # `if __name__ == "__main__":` block is not run.
    program_module = type(tools.sys_module)(PROGRAM_MODULE)
    tools.sys_module.modules[PROGRAM_MODULE] = program_module
    namespace = program_module.__dict__
    namespace["__builtins__"] = copy_dict(builtins_)
    try:
        try:
            exec_(compile_(program, "<program>", "exec"), namespace)
        except base_exception as exc:
            resource = classify(exc)
            status = resource_status if resource else error_status
            emit(("program", -1, status, resource, *describe(exc, tools)))
            return
        emit(("program", -1, passed_status, "", "", ""))
        index = 0
        while index < count:
            namespace["__builtins__"] = copy_dict(builtins_)
            passed = False
            try:
                exec_(compile_(tests[index], f"<test {index}>", "exec"), namespace)
                passed = True
            except assertion_error as exc:
                emit(("test", index, failed_status, "", *describe(exc, tools)))
            except base_exception as exc:
                resource = classify(exc)
                status = resource_status if resource else error_status
                emit(("test", index, status, resource, *describe(exc, tools)))
            if passed:
                emit(("test", index, passed_status, "", "", ""))
            index += 1
        flush(tools)
    except base_exception:
        pass  # the outcomes already sent stand; a test without one was not run
    finally:
        emit(None)


def _flush(tools: _Tools) -> None:
    """Flush the program's buffered output before the process ends with ``os._exit``."""
    for name in ("stdout", "stderr"):
        try:  # noqa: SIM105 - no contextlib here; the program may have closed or replaced it
            getattr(tools.sys_module, name).flush()
        except BaseException:
            pass


def _classify(exc: BaseException) -> str:
    """The limit an exception says was hit ("" for a plain error)."""
    import errno

    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, OSError):
        code = exc.errno
        if code in (errno.EMFILE, errno.ENFILE):
            return "open_files"
        if code == errno.EFBIG:
            return "file_size"
        if code in (errno.ENOSPC, errno.EDQUOT):
            return "disk"
        if code == errno.EAGAIN and isinstance(exc, BlockingIOError):
            return "processes"  # fork() refused by RLIMIT_NPROC
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "processes"
    return ""


def _describe(exc: BaseException, tools: _Tools) -> tuple[str, str]:
    """(exception type, the last lines of its traceback), both plain ``str``.

    The traceback is printed by the interpreter's C ``excepthook``, which walks the
    frames without Python code (the audit hook refuses ``tb_frame`` to Python code)."""
    system = tools.sys_module
    try:
        name = _plain(type(exc).__name__)
    except BaseException:
        name = "<unknown>"
    buffer = tools.stringio()
    saved = system.stderr
    try:
        system.stderr = buffer
        tools.excepthook(type(exc), exc, exc.__traceback__)
        text = _plain(buffer.getvalue())
    except BaseException:
        text = name
    finally:
        system.stderr = saved
    # The harness's own frames (this file runs as "<string>") say nothing of the program.
    lines = [line for line in text.rstrip("\n").split("\n") if not line.startswith(_OWN_FRAME)]
    return name, "\n".join(lines[-tools.traceback_lines :])[-tools.detail_chars :]


def _plain(value: object) -> str:
    """An exact ``str`` copy of a string the program made (it may be a subclass with
    methods of its own), or a placeholder."""
    if isinstance(value, str):
        return str.__getitem__(value, slice(None))
    return "<not a string>"


def _audit_hook(
    trusted_prefixes: tuple[str, ...],
    os_open: Callable[[str, int], int],
    os_read: Callable[[int, int], bytes],
    os_close: Callable[[int], None],
    thread_id: Callable[[], int],
) -> Callable[[str, tuple[Any, ...]], None]:
    """The hook that refuses the ways to a frame, to the object graph and to new code.

    ``marshal.loads`` is how the import system loads a ``.pyc`` file; it is allowed
    when its bytes are those of the ``.pyc`` file this thread opened just before, read
    again here, at a trusted (read-only) path — never bytes the program made. The hook
    looks up no global and no builtin: all it uses is bound here, before the program
    runs, and it compares types with ``is`` (a ``str`` subclass has methods of its own)."""
    opened: dict[int, str] = {}  # thread -> the .pyc it opened last
    reading: dict[int, str] = {}  # thread -> the .pyc this hook is reading itself
    denied_events = _DENIED_EVENTS
    denied_prefixes = _DENIED_PREFIXES
    frame_attributes = _FRAME_ATTRIBUTES
    denied_modules = _DENIED_MODULES
    header = _PYC_HEADER
    type_, str_, bytes_ = type, str, bytes
    value_error, os_error = ValueError, OSError

    def deny(event: str) -> None:
        raise value_error(f"{event}: not allowed in the evald sandbox")

    def trusted_bytecode(data: object) -> bool:
        me = thread_id()
        path = opened.pop(me, None)
        if type_(data) is not bytes_ or path is None:
            return False
        if "/../" in path or not path.startswith(trusted_prefixes):
            return False
        reading[me] = path
        try:
            fd = os_open(path, 0)
            try:
                content = b""
                while True:
                    chunk = os_read(fd, 1 << 20)
                    if not chunk:
                        break
                    content += chunk
            finally:
                os_close(fd)
        except os_error:
            return False
        finally:
            del reading[me]
        return content[header:] == data

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path = args[0]
            if type_(path) is str_ and path.endswith(".pyc"):
                me = thread_id()
                if reading.get(me) != path:
                    opened[me] = path
            return
        if event == "marshal.loads":
            if not trusted_bytecode(args[0]):
                deny(event)
            return
        if event in denied_events or event.startswith(denied_prefixes):
            deny(event)
        if event == "object.__getattr__" and args[1] in frame_attributes:
            deny(f"{event} {args[1]}")
        if event == "object.__setattr__" and args[1] == "__code__":
            deny(f"{event} {args[1]}")
        if (
            event == "import"
            and type_(args[0]) is str_
            and args[0].rpartition(".")[2] in denied_modules
        ):
            deny(f"import {args[0]}")

    return hook


if __name__ == "__main__":
    main()
