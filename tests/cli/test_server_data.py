"""What a server sends is data the CLI checks, not trusts, through the real CLI against
a real (fake) gRPC server on loopback: a model's answer, a model id or an error message
with rich markup or terminal control sequences in it prints as text (escaped), and a
value the SDK cannot represent is one error line, not a traceback."""

import grpc
import pytest

from evald_cli.main import main
from tests.client import _protos
from tests.client._servicer import Failure, FakeEvaluationService

# OSC 52 (set the clipboard), a colour, a screen clear, a bidi override; rich markup
# whose closing tag closes nothing (rich's MarkupError), and an emoji code.
HOSTILE = "\x1b]52;c;ZXZpbA==\x07 \x1b[31mred \x1b[2J \u202eevil [/] [bold]x :smile:"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _raw_controls(text: str) -> list[str]:
    return [c for c in text if (c < " " and c != "\n") or "\x7f" <= c <= "\x9f" or c == "\u202e"]


def test_a_models_answer_is_shown_as_text(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = _protos.sample(1)
    sample.output = "[/] :smile: \x1b]52;c;ZXZpbA==\x07"
    sample.expected = "[red]gold[/red]"
    servicer.add_run(_protos.run("r-1"), samples=[sample])
    code, out, err = _run(capsys, "samples", "r-1", "--server", address)
    assert (code, err) == (0, "")
    assert _raw_controls(out) == []
    assert "\\x1b]52;c;ZXZpbA==\\x07" in out
    assert "[/] :smile:" in out  # markup and emoji codes are text
    assert "[red]gold[/red]" in out


def test_server_names_are_shown_as_text(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    servicer.models = [_protos.model(f"m{HOSTILE}"[:40])]
    code, out, err = _run(capsys, "models", "--server", address)
    assert (code, err) == (0, "")
    assert _raw_controls(out) == []
    assert "m\\x1b]52" in out


def test_a_servers_error_message_is_one_escaped_line(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    servicer.fail["ListModels"] = Failure(
        grpc.StatusCode.INVALID_ARGUMENT, f"bad\n{HOSTILE}", reason="INVALID_ARGUMENT"
    )
    code, out, err = _run(capsys, "models", "--server", address)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert _raw_controls(err[:-1]) == []
    assert "bad\\x0a\\x1b]52;c;ZXZpbA==\\x07" in err


def test_a_timestamp_no_datetime_holds_is_one_error_line(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _protos.run("r-1")
    run.created_time.seconds = 10**15  # year ~31.7 million
    servicer.add_run(run)
    code, out, err = _run(capsys, "runs", "--server", address)
    assert (code, out) == (1, "")
    assert err == (
        "evald: error: INTERNAL: the server sent an invalid timestamp in Run.created_time "
        "(seconds 1000000000000000, nanos 0)\n"
    )


def test_results_json_without_a_json_form_is_one_error_line(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    servicer.add_run(_protos.run("r-1"))
    servicer.results["r-1"][0].created_time.seconds = -(10**15)
    code, out, err = _run(capsys, "results", "r-1", "--json", "--server", address)
    assert (code, out) == (1, "")
    assert err.startswith("evald: error: INTERNAL: the server's results have no JSON form: ")
    assert err.count("\n") == 1
