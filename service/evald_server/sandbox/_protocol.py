"""The host's side of the harness protocol: the job it sends, the records it reads back.

The job is one JSON object on the harness's stdin (``_harness`` documents it); the
records come back on a pipe, one line each, ``<nonce> <JSON array>``. Everything on
that pipe is hostile: the program can write to it too. A line that does not begin
with this run's nonce is counted and dropped; an authenticated line is validated
against the bounds below before anything reads it.
"""

import json
import secrets
from dataclasses import dataclass, field
from enum import StrEnum

from evald_server.sandbox import _harness

MAX_PROGRAM_BYTES = 4 << 20  # the program's source, UTF-8 (a prompt and an answer)
MAX_TESTS = 1000
MAX_TEST_BYTES = 1 << 20  # each test's source
MAX_TESTS_BYTES = 4 << 20  # all tests' sources together
DETAIL_CHARS = 4000  # of an error's traceback, kept per outcome
MAX_RESULT_BYTES = 4 << 20  # read from the result pipe; beyond, the rest is dropped
MAX_LINE_BYTES = 64 << 10  # one record (a detail of DETAIL_CHARS escapes to < 6x)
_NONCE_BYTES = 32


class TestStatus(StrEnum):
    """How one test (or the program itself, before its tests) ended."""

    __test__ = False  # not a pytest test class

    PASSED = "passed"
    FAILED = "failed"  # an AssertionError
    ERROR = "error"  # any other exception
    RESOURCE_LIMIT = "resource_limit"  # an exception that says a limit was hit
    NOT_RUN = "not_run"  # no outcome: an earlier failure, a timeout or a crash


class Resource(StrEnum):
    """Which limit an outcome (or the process's end) says was hit."""

    NONE = ""
    MEMORY = "memory"
    OPEN_FILES = "open_files"
    FILE_SIZE = "file_size"
    DISK = "disk"
    PROCESSES = "processes"
    CPU = "cpu"
    KILLED = "killed"  # SIGKILL from the kernel: the CPU hard limit or the OOM killer


_STATUS_OF_WIRE = {
    _harness.PASSED: TestStatus.PASSED,
    _harness.FAILED: TestStatus.FAILED,
    _harness.ERROR: TestStatus.ERROR,
    _harness.RESOURCE: TestStatus.RESOURCE_LIMIT,
}
_WIRE_RESOURCES = {r.value: r for r in Resource if r not in (Resource.CPU, Resource.KILLED)}


class JobTooLarge(ValueError):
    """A program or its tests exceed the protocol's bounds (the message names which)."""


@dataclass(frozen=True, slots=True)
class TestJob:
    """What one sandbox run executes: the program, then each test in its namespace.

    A test is Python source run after the program in the program's globals (an
    ``assert`` line, or a ``check`` function and its call); each has its own outcome.
    """

    __test__ = False  # not a pytest test class

    program: str
    tests: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.program.encode("utf-8", "surrogatepass")) > MAX_PROGRAM_BYTES:
            raise JobTooLarge(f"the program exceeds {MAX_PROGRAM_BYTES} bytes")
        if len(self.tests) > MAX_TESTS:
            raise JobTooLarge(f"{len(self.tests)} tests exceed the limit of {MAX_TESTS}")
        total = 0
        for index, test in enumerate(self.tests):
            size = len(test.encode("utf-8", "surrogatepass"))
            if size > MAX_TEST_BYTES:
                raise JobTooLarge(f"test {index} exceeds {MAX_TEST_BYTES} bytes")
            total += size
        if total > MAX_TESTS_BYTES:
            raise JobTooLarge(f"the tests together exceed {MAX_TESTS_BYTES} bytes")


@dataclass(frozen=True, slots=True)
class Outcome:
    """One authenticated record: the program's (index -1) or a test's."""

    index: int
    status: TestStatus
    resource: Resource
    error_type: str
    detail: str


@dataclass(slots=True)
class Records:
    """What the harness reported, read from the result pipe."""

    started: bool = False
    done: bool = False
    program: Outcome | None = None
    tests: dict[int, Outcome] = field(default_factory=dict)
    unauthenticated: int = 0  # lines without this run's nonce (the program's writes)
    malformed: int = 0  # authenticated lines that do not parse: a cut-up record


def new_nonce() -> str:
    return secrets.token_hex(_NONCE_BYTES)


def encode_job(
    job: TestJob,
    *,
    nonce: str,
    result_fd: int,
    trusted_prefixes: tuple[str, ...],
    traceback_lines: int,
) -> bytes:
    body = {
        "nonce": nonce,
        "result_fd": result_fd,
        "program": job.program,
        "tests": list(job.tests),
        "trusted_prefixes": list(trusted_prefixes),
        "traceback_lines": traceback_lines,
        "detail_chars": DETAIL_CHARS,
    }
    return json.dumps(body, ensure_ascii=True).encode("ascii")


def read_records(data: bytes, *, nonce: str, tests: int) -> Records:
    """The records in the result pipe's bytes (the last line may be cut short)."""
    records = Records()
    prefix = nonce.encode("ascii") + b" "
    for line in data.split(b"\n"):
        if not line:
            continue
        if not line.startswith(prefix):
            records.unauthenticated += 1
            continue
        if len(line) > MAX_LINE_BYTES or not _apply(records, line[len(prefix) :], tests):
            records.malformed += 1
    return records


def _apply(records: Records, body: bytes, tests: int) -> bool:
    try:
        item = json.loads(body)
    except ValueError:
        return False
    if not isinstance(item, list) or len(item) != 6:
        return False
    kind, index, status, resource, error_type, detail = item
    if not all(isinstance(v, str) for v in (kind, status, resource, error_type, detail)):
        return False
    if isinstance(index, bool) or not isinstance(index, int):
        return False
    if kind == "started":
        records.started = True
        return True
    if kind == "done":
        records.done = True
        return True
    if kind not in ("program", "test") or status not in _STATUS_OF_WIRE:
        return False
    if resource not in _WIRE_RESOURCES or len(error_type) > 200 or len(detail) > DETAIL_CHARS:
        return False
    outcome = Outcome(index, _STATUS_OF_WIRE[status], _WIRE_RESOURCES[resource], error_type, detail)
    if kind == "program" and index == -1 and records.program is None:
        records.program = outcome
        return True
    if kind == "test" and 0 <= index < tests and index not in records.tests:
        records.tests[index] = outcome
        return True
    return False
