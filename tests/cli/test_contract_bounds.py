"""``evald contract check`` against hostile reflection servers (a real grpc.aio server on
loopback): endless imports, huge files, garbage bytes, a server that never answers or
never stops answering. Each ends with exit 1 and one line naming what happened — never
a traceback, a hang or an unbounded loop — and server text reaches the terminal escaped.
"""

import asyncio
import time
from collections.abc import Sequence

import pytest
from google.protobuf import descriptor_pb2

from evald_cli._reflection import MAX_SHOWN_CHARS
from evald_cli.main import main
from tests.cli._reflection_server import (
    FOREVER,
    HostileReflection,
    Request,
    Response,
    evald_files,
    files_answer,
    hostile_reflection,
    service_file,
    serving,
)

ESCAPE = "\x1b]52;c;ZXZpbA==\x07"  # OSC 52: would set the terminal's clipboard


def _check(
    capsys: pytest.CaptureFixture[str], behaviour: HostileReflection, *flags: str
) -> tuple[int, str, str]:
    with hostile_reflection(behaviour) as address:
        code = main(["contract", "check", "--server", address, *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_error(code: int, err: str) -> str:
    """The one error line (exit 1, nothing else on stderr, no raw control character)."""
    assert code == 1, err
    assert err.endswith("\n")
    assert err.count("\n") == 1, err
    assert err.startswith("evald: error: "), err
    assert "Traceback" not in err
    assert not any(c < " " for c in err[:-1]), repr(err)
    return err


def test_endless_imports_stop_at_max_files(capsys: pytest.CaptureFixture[str]) -> None:
    async def endless(request: Request) -> Sequence[bytes | None]:
        if request.HasField("file_containing_symbol"):
            return [files_answer(service_file("f0.proto"))]
        n = int(request.file_by_filename.removeprefix("f").removesuffix(".proto"))
        return [files_answer(descriptor_pb2.FileDescriptorProto(
            name=f"f{n}.proto", dependency=[f"f{n + 1}.proto"]
        ))]  # fmt: skip

    server = HostileReflection(endless)
    code, _, err = _check(capsys, server, "--max-files", "25")
    assert "more than --max-files 25 files" in _one_line_error(code, err)
    assert len(server.requests) == 25  # the service's file and 24 imports, then it stopped


def test_an_answer_naming_too_many_imports_stops_at_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def wide(request: Request) -> Sequence[bytes | None]:
        return [files_answer(service_file(*(f"f{i}.proto" for i in range(10_000))))]

    server = HostileReflection(wide)
    code, _, err = _check(capsys, server)
    assert "more than --max-files 200 files (they name 10001)" in _one_line_error(code, err)
    assert len(server.requests) == 1


def test_a_file_larger_than_max_bytes_is_refused_by_the_channel(
    capsys: pytest.CaptureFixture[str],
) -> None:
    huge = service_file()
    huge.message_type.add(name="Huge", field=[
        {"name": f"field_{i}", "number": i + 1, "type": 9, "label": 1} for i in range(5_000)
    ])  # fmt: skip

    async def answer(request: Request) -> Sequence[bytes | None]:
        return [files_answer(huge)]

    code, _, err = _check(capsys, HostileReflection(answer), "--max-bytes", "65536")
    assert huge.ByteSize() > 65536
    assert "a reflection answer is larger than --max-bytes 65536" in _one_line_error(code, err)


def test_answers_adding_up_past_max_bytes_stop(capsys: pytest.CaptureFixture[str]) -> None:
    padding = "x" * 20_000

    async def chain(request: Request) -> Sequence[bytes | None]:
        name = request.file_by_filename or "evald/v1/service.proto"
        n = 0 if request.HasField("file_containing_symbol") else int(name[1:].split(".")[0]) + 1
        file = service_file(f"f{n}.proto") if n == 0 and "/" in name else None
        file = file or descriptor_pb2.FileDescriptorProto(name=name, dependency=[f"f{n}.proto"])
        file.options.java_package = padding  # 20 KB per answer
        return [files_answer(file)]

    server = HostileReflection(chain)
    code, _, err = _check(capsys, server, "--max-bytes", "65536")
    assert "reflection answers exceed --max-bytes 65536" in _one_line_error(code, err)
    assert len(server.requests) == 4  # 4 × 20 KB > 64 KiB


@pytest.mark.parametrize(
    ("answers", "said"),
    [
        ([b"\xff\xff\xff\xff"], "is not a ServerReflectionResponse"),
        ([files_answer(b"\xff\xff\xff\xff")], "is not a FileDescriptorProto"),
        ([files_answer(b"")], "holds a file with no name"),
        ([Response(list_services_response={}).SerializeToString()], "with list_services_response"),
        ([b""], "answered a request for files with nothing"),
        ([None], "ended the reflection stream without an answer"),
        ([files_answer()], "declare no evald.v1.EvaluationService"),
        ([files_answer(descriptor_pb2.FileDescriptorProto(name="other.proto"))], "declare no"),
    ],
    ids=[
        "garbage-answer", "garbage-file", "nameless-file", "other-answer", "empty-answer",
        "no-answer", "no-files", "no-service",
    ],
)  # fmt: skip
def test_what_is_not_a_descriptor_is_named(
    capsys: pytest.CaptureFixture[str], answers: list[bytes | None], said: str
) -> None:
    async def answer(request: Request) -> Sequence[bytes | None]:
        return answers

    code, _, err = _check(capsys, HostileReflection(answer))
    assert said in _one_line_error(code, err)


def test_an_import_the_server_does_not_serve_ends_the_fetch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = evald_files()

    async def answer(request: Request) -> Sequence[bytes | None]:
        if request.file_by_filename == "google/protobuf/timestamp.proto":
            return [files_answer(files["google/protobuf/duration.proto"])]  # not the one asked
        return await serving(files)(request)

    server = HostileReflection(answer)
    code, _, err = _check(capsys, server)
    line = _one_line_error(code, err)
    assert "the server did not serve google/protobuf/timestamp.proto" in line
    asked = [r.file_by_filename for r in server.requests]
    assert asked.count("google/protobuf/timestamp.proto") == 1  # asked once, not in a loop


def test_a_server_that_never_answers_is_bounded_by_the_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def never(request: Request) -> Sequence[bytes | None]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    code, _, err = _check(capsys, HostileReflection(never), "--timeout", "0.5")
    line = _one_line_error(code, err)
    assert "reflection did not finish within --timeout 0.5 s (0 files received)" in line


def test_a_server_that_never_stops_answering_is_read_once_per_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = evald_files()

    async def forever(request: Request) -> Sequence[bytes | None]:
        return [*(await serving(files)(request)), FOREVER]

    server = HostileReflection(forever)
    code, out, err = _check(capsys, server)
    assert (code, err) == (0, ""), err
    assert "is compatible with the contract this client was generated from" in out
    assert len(server.requests) == len(files)  # one request per file
    # ...and each endless stream cancelled after one answer. The server counts a cancel
    # in its own thread once it sees it, which may come after the client has returned
    # (14 of 15 counted at that moment on a loaded machine): wait for it, bounded.
    deadline = time.monotonic() + 30
    while server.cancelled < len(files) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.cancelled == len(files)


def test_server_text_is_one_escaped_line(capsys: pytest.CaptureFixture[str]) -> None:
    message = f"no such file\n{ESCAPE}[/] " + "x" * 1000

    async def error(request: Request) -> Sequence[bytes | None]:
        response = Response(error_response={"error_code": 5, "error_message": message})
        return [response.SerializeToString()]

    code, _, err = _check(capsys, HostileReflection(error))
    line = _one_line_error(code, err)
    assert "reflection: no such file\\x0a\\x1b]52;c;ZXZpbA==\\x07[/] xxx" in line
    assert "(code 5)" in line
    assert len(line) < MAX_SHOWN_CHARS + 60


def test_descriptor_names_buf_quotes_are_shown_escaped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = evald_files()
    service = files["evald/v1/service.proto"]
    service.message_type[0].name = f"Evil{ESCAPE}Name"

    code, out, err = _check(capsys, HostileReflection(serving(files)))
    assert code in (1, 4)
    assert "Traceback" not in err
    shown = out + err
    assert "\x1b" not in shown
    assert "Evil\\x1b]52;c;ZXZpbA==" in shown  # escaped (by buf, or by us after it)


def test_no_reflection_at_all_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    server = HostileReflection(serving(evald_files()), unimplemented=True)
    code, _, err = _check(capsys, server)
    assert "the server serves no gRPC reflection (Method not found!)" in _one_line_error(code, err)


@pytest.mark.parametrize(
    ("flag", "value"), [("--max-files", "0"), ("--max-bytes", "-1"), ("--timeout", "inf")]
)
def test_bounds_must_be_positive(capsys: pytest.CaptureFixture[str], flag: str, value: str) -> None:
    code = main(["contract", "check", "--server", "127.0.0.1:1", flag, value])
    assert code == 2
    assert flag in capsys.readouterr().err
