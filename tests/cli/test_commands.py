"""The client commands against the fake server: output, JSON, errors and exit codes."""

import json
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from evald.v1 import enums_pb2, service_pb2
from evald_cli.main import main
from tests.client import _protos
from tests.client._servicer import Failure, FakeEvaluationService

FAILED = enums_pb2.SUBTASK_STATE_FAILED_PERMANENT


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_models_table_and_json(address: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "models", "--server", address)
    assert (code, err) == (0, "")
    assert "sim-a" in out
    assert "simulated" in out
    code, out, _ = _run(capsys, "models", "--server", address, "--json")
    assert [m["model_id"] for m in json.loads(out)] == ["sim-a", "sim-b"]


def test_upload_then_list(
    servicer: FakeEvaluationService,
    address: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"input": "good", "label": "positive"}\n' * 3, encoding="utf-8")
    code, out, err = _run(
        capsys,
        "datasets",
        "upload",
        str(path),
        "--name",
        "s",
        "--version",
        "1.0.0",
        "--task-type",
        "classification",
        "--prompt-template",
        "Say: {input}",
        "--server",
        address,
    )
    assert (code, err) == (0, "")
    assert out.startswith("uploaded s@1.0.0: classification, 3 records, sha256 ")
    header, _, content = servicer.uploads[0]
    assert header.prompt_template == "Say: {input}"
    assert content == path.read_bytes()
    code, out, _ = _run(capsys, "datasets", "list", "--server", address, "--json")
    assert [(d["name"], d["version"], d["task_type"]) for d in json.loads(out)] == [
        ("s", "1.0.0", "classification")
    ]


def test_upload_of_a_missing_file_is_one_line(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys,
        "datasets",
        "upload",
        str(tmp_path / "no.jsonl"),
        "--name",
        "s",
        "--version",
        "1",
        "--task-type",
        "qa",
        "--server",
        address,
    )
    assert code == 1
    assert err == f"evald: error: {tmp_path / 'no.jsonl'}: no such file\n"


def test_submit_with_watch_follows_to_the_end_and_prints_results(
    servicer: FakeEvaluationService,
    address: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = tmp_path / "run.toml"
    spec.write_text(
        'name = "n"\nmodels = ["sim-a", "sim-b"]\ndatasets = ["sentiment@1.0"]\n'
        'max_concurrency = 4\n[labels]\nteam = "x"\n',
        encoding="utf-8",
    )
    code, out, err = _run(capsys, "submit", str(spec), "--watch", "--server", address)
    assert err == ""
    assert code == 3  # the fake run ends PARTIAL: results exist, but a CI step fails
    lines = out.splitlines()
    assert lines[0] == "r-1"
    assert "run r-1: running" in lines
    assert any(line.startswith("progress ") for line in lines)
    assert any(line.startswith("failed sim-b record rec-9 after 4 attempts") for line in lines)
    assert "scored sim-a on sentiment@1.0: partial_success accuracy=0.900 f1_macro=0.850" in lines
    assert "sentiment@1.0 (classification)" in out  # the results table
    assert lines[-1] == "run r-1: partial"
    request = servicer.created[0]
    assert request.spec.max_concurrency == 4
    assert dict(request.spec.labels) == {"team": "x"}
    code, out, _ = _run(
        capsys, "submit", str(spec), "--watch", "--accept-partial", "--server", address
    )
    assert code == 0
    assert out.splitlines()[-1].endswith(": partial")


def test_submit_without_watch_prints_only_the_id(
    address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "run.json"
    spec.write_text('{"models": ["sim-a"], "datasets": ["d@1"]}', encoding="utf-8")
    assert _run(capsys, "submit", str(spec), "--server", address) == (0, "r-1\n", "")


def test_watch_of_a_cancelled_run_exits_5(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _protos.event_log("r-1")
    events[-1].state_changed.state = enums_pb2.RUN_STATE_CANCELLED
    servicer.add_run(_protos.run("r-1"), events=events)
    code, out, _ = _run(capsys, "watch", "r-1", "--accept-partial", "--server", address)
    assert code == 5
    assert out.splitlines()[-1] == "run r-1: cancelled"


def test_results_json_is_machine_readable(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    servicer.add_run(_protos.run("r-1"))
    code, out, _ = _run(capsys, "results", "r-1", "--json", "--server", address)
    assert code == 0
    # The proto3 JSON mapping of ListResultsResponse: what `buf curl` prints.
    document = json.loads(out)
    expected = json_format.MessageToDict(
        service_pb2.ListResultsResponse(results=servicer.results["r-1"])
    )
    assert document == expected
    first = document["results"][0]
    assert first["metricsSummary"]["accuracy"] == 0.9
    assert first["status"].startswith("RESULT_STATUS_")
    assert first["createdTime"].startswith("2023-11-14T")
    code, out, _ = _run(capsys, "results", "r-1", "--server", address)
    assert "sentiment@1.0 (classification)" in out
    assert "0.900" in out


def test_samples_failed_and_limit(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    samples = [_protos.sample(i, state=FAILED if i % 2 else 3) for i in range(10)]
    servicer.add_run(_protos.run("r-1"), samples=samples)
    code, out, _ = _run(
        capsys, "samples", "r-1", "--failed", "--limit", "3", "--json", "--server", address
    )
    assert code == 0
    rows = json.loads(out)
    assert [r["record_id"] for r in rows] == ["rec-1", "rec-3", "rec-5"]
    assert rows[0]["last_error"]["reason"] == "PROVIDER_HTTP_5XX"
    code, out, _ = _run(capsys, "samples", "r-1", "--server", address, "--limit", "0")
    assert code == 0
    assert "rec-9" in out
    assert "PROVIDER_HTTP_5XX" in out


def test_cancel_and_retry(
    servicer: FakeEvaluationService, address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    servicer.add_run(_protos.run("r-1"))
    assert _run(capsys, "cancel", "r-1", "--server", address) == (0, "run r-1: cancelled\n", "")
    code, out, _ = _run(
        capsys,
        "retry",
        "r-1",
        "--task",
        "t-1",
        "--category",
        "model_provider_error",
        "--server",
        address,
    )
    assert code == 0
    assert out == "run r-1: 3 samples re-queued, cancelled\n"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["watch", "r-x"], "evald: error: NOT_FOUND RUN_NOT_FOUND: run 'r-x' not found\n"),
        (["results", "r-x"], "evald: error: NOT_FOUND RUN_NOT_FOUND: run 'r-x' not found\n"),
        (["cancel", "r-x"], "evald: error: NOT_FOUND RUN_NOT_FOUND: run 'r-x' not found\n"),
    ],
)
def test_server_errors_print_one_line_and_exit_1(
    address: str, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert _run(capsys, *argv, "--server", address) == (1, "", expected)


def test_rich_errors_keep_their_details_on_the_line(
    servicer: FakeEvaluationService,
    address: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    servicer.fail["CreateRun"] = Failure(
        grpc.StatusCode.INVALID_ARGUMENT,
        "the run spec is invalid",
        reason="RUN_SPEC_INVALID",
        violations=(("spec.model_ids[0]", "no model 'gpt-9'"),),
    )
    spec = tmp_path / "run.json"
    spec.write_text('{"models": ["gpt-9"], "datasets": ["d@1"]}', encoding="utf-8")
    code, _, err = _run(capsys, "submit", str(spec), "--server", address)
    assert code == 1
    assert err == (
        "evald: error: INVALID_ARGUMENT RUN_SPEC_INVALID: the run spec is invalid "
        "(spec.model_ids[0]: no model 'gpt-9')\n"
    )


def test_token_from_env_and_unauthenticated(
    servicer: FakeEvaluationService,
    address: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    servicer.token = "s3cret"
    monkeypatch.setenv("EVALD_TOKEN", "s3cret")
    assert _run(capsys, "models", "--server", address, "--json")[0] == 0
    monkeypatch.delenv("EVALD_TOKEN")
    code, _, err = _run(capsys, "models", "--server", address)
    assert code == 1
    assert err == "evald: error: UNAUTHENTICATED: missing or unknown token\n"


def test_an_unreachable_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "models", "--server", "127.0.0.1:1")
    assert code == 1
    assert err.startswith("evald: error: UNAVAILABLE: ")
    assert err.count("\n") == 1
