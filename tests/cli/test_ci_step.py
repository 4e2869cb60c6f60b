"""The CLI as a CI step, against a real server process: the exit status says how the
run ended, JSON returns every row, ``--task`` takes what the tables show, a sample
that succeeded after a retry reads as retried, and retry filters by reason and state."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evald_client import DatasetInvalid, EvaldClient, RunState, SubtaskState
from tests._shared import run_cli
from tests.harness import ServerProcess, config_data, write_config

RECORDS = 12
# The documented exit statuses (docs/cli.md, "Exit status"): pinned here, not imported.
EXIT_PARTIAL, EXIT_FAILED, EXIT_CANCELLED = 3, 4, 5


def _simulated(model_id: str, fault_rate: float, latency_ms: float = 1.0) -> dict[str, object]:
    return {
        "id": model_id,
        "provider": "simulated",
        "max_concurrency": 4,
        "simulator": {"fault_rate": fault_rate, "latency_ms_median": latency_ms, "seed": 7},
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp_path = tmp_path_factory.mktemp("ci-step")
    models = [
        _simulated("sim-ok", 0.0),
        _simulated("sim-flaky", 0.5),
        _simulated("sim-broken", 1.0),
        _simulated("sim-slow", 0.0, latency_ms=2_000),
    ]
    process = ServerProcess(write_config(tmp_path, config_data(tmp_path, models=models)))
    try:
        address = process.start()
        records = [
            {"id": f"r{i}", "input": f"text {i}", "label": "pos" if i % 2 else "neg"}
            for i in range(RECORDS)
        ]
        with EvaldClient(address) as client:
            client.upload_dataset(
                name="reviews", version="1.0.0", task_type="classification", records=records
            )
        yield address
    finally:
        process.kill()


def _spec(tmp_path: Path, model: str, max_retries: int) -> str:
    path = tmp_path / f"{model}-{max_retries}.toml"
    path.write_text(
        f'models = ["{model}"]\ndatasets = ["reviews@1.0.0"]\n'
        f"[retry_policy]\nmax_retries = {max_retries}\nbackoff_s = [0.01]\n",
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.parametrize(
    ("model", "max_retries", "state", "status"),
    [
        ("sim-ok", 0, "succeeded", 0),
        ("sim-flaky", 0, "partial", EXIT_PARTIAL),
        ("sim-broken", 0, "failed", EXIT_FAILED),
    ],
)
def test_submit_watch_exits_with_how_the_run_ended(
    server: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    model: str,
    max_retries: int,
    state: str,
    status: int,
) -> None:
    spec = _spec(tmp_path, model, max_retries)
    code, out, err = run_cli(capsys, "submit", spec, "--watch", "--server", server)
    assert (code, err) == (status, ""), out
    run_id = out.splitlines()[0]
    assert out.splitlines()[-1] == f"run {run_id}: {state}"
    # `evald watch` of the finished run says the same; --accept-partial lets partial pass.
    assert run_cli(capsys, "watch", run_id, "--server", server)[0] == status
    accepted = run_cli(capsys, "watch", run_id, "--accept-partial", "--server", server)[0]
    assert accepted == (0 if state == "partial" else status)


def test_watch_of_a_cancelled_run_exits_with_the_cancelled_status(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EvaldClient(server) as client:
        run = client.create_run(models=["sim-slow"], datasets=[("reviews", "1.0.0")])
        client.cancel_run(run.run_id)
        assert client.wait(run.run_id, timeout_s=30).state is RunState.CANCELLED
    code, out, _ = run_cli(capsys, "watch", run.run_id, "--accept-partial", "--server", server)
    assert code == EXIT_CANCELLED
    assert out.splitlines()[-1] == f"run {run.run_id}: cancelled"


def test_samples_json_task_selectors_and_retried_rows(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "two.toml"
    spec.write_text(
        'models = ["sim-ok", "sim-flaky"]\ndatasets = ["reviews@1.0.0"]\n'
        "[retry_policy]\nmax_retries = 20\nbackoff_s = [0.01]\njitter_fraction = 0.0\n",
        encoding="utf-8",
    )
    code, out, _ = run_cli(capsys, "submit", str(spec), "--watch", "--server", server)
    assert code == 0, out
    run_id = out.splitlines()[0]

    # JSON returns every sample (2 × 12), more than a table's default would show.
    code, out, _ = run_cli(capsys, "samples", run_id, "--json", "--limit", "0", "--server", server)
    every = json.loads(out)
    code, out, _ = run_cli(capsys, "samples", run_id, "--json", "--server", server)
    assert json.loads(out) == every
    assert len(every) == 2 * RECORDS
    code, out, _ = run_cli(capsys, "samples", run_id, "--json", "--limit", "3", "--server", server)
    assert len(json.loads(out)) == 3

    # MODEL/DATASET[@VERSION] selects a task, as does the full task id.
    flaky = [s for s in every if s["model_id"] == "sim-flaky"]
    for selector in ("sim-flaky/reviews", "sim-flaky/reviews@1.0.0", flaky[0]["task_id"]):
        code, out, _ = run_cli(
            capsys, "samples", run_id, "--task", selector, "--json", "--server", server
        )
        assert code == 0
        assert {s["task_id"] for s in json.loads(out)} == {flaky[0]["task_id"]}
    code, _, err = run_cli(
        capsys, "samples", run_id, "--task", "sim-nope/reviews", "--server", server
    )
    assert code == 1
    assert "matches no task" in err
    assert "sim-flaky/reviews@1.0.0" in err

    # Samples that needed retries succeeded: the table says "retried", not an error.
    retried = [s for s in flaky if s["last_error"] is not None]
    assert retried, "fault_rate 0.5 makes some samples fail before they succeed"
    assert all(s["state"] == "succeeded" for s in retried)
    code, out, _ = run_cli(
        capsys, "samples", run_id, "--task", "sim-flaky/reviews", "--server", server
    )
    assert "sim-flaky/reviews@1.0.0" in out  # the task as --task takes it
    assert "succeeded (retried)" in out
    assert "PROVIDER_HTTP_5XX:" not in out  # no failure text on a sample that succeeded

    # A table stops at 50 rows by default and says what it left out.
    code, out, _ = run_cli(capsys, "samples", run_id, "--limit", "5", "--server", server)
    assert f"5 of {2 * RECORDS} samples shown" in out


def test_retry_by_reason_and_task_selector(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_cli(
        capsys, "submit", _spec(tmp_path, "sim-broken", 0), "--watch", "--server", server
    )
    run_id = out.splitlines()[0]
    assert code == EXIT_FAILED
    code, _, err = run_cli(
        capsys, "retry", run_id, "--reason", "PROVIDER_REJECTED", "--server", server
    )
    assert code == 1
    assert "RUN_NOT_RETRYABLE" in err  # every failure is a 5xx, none was rejected
    code, _, err = run_cli(capsys, "retry", run_id, "--reason", "NO_SUCH", "--server", server)
    assert (code, err) == (1, "evald: error: --reason: unknown error reason 'NO_SUCH'\n")
    code, out, _ = run_cli(
        capsys,
        "retry",
        run_id,
        "--reason",
        "PROVIDER_HTTP_5XX",
        "--task",
        "sim-broken/reviews",
        "--state",
        "failed_permanent",
        "--server",
        server,
    )
    assert code == 0
    assert out.startswith(f"run {run_id}: {RECORDS} samples re-queued")
    with EvaldClient(server) as client:
        final = client.wait(run_id, timeout_s=30)
        assert final.state is RunState.FAILED
        failed = list(client.samples(run_id, state=SubtaskState.FAILED_PERMANENT))
        assert all(s.attempts == 2 for s in failed)


def test_errors_say_it_once_and_name_the_flag(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"input": "a", "label": "pos"}\n', encoding="utf-8")
    with EvaldClient(server) as client, pytest.raises(DatasetInvalid) as caught:
        client.upload_dataset(name="d", version="1.0", task_type="classification", path=data)
    assert str(caught.value) == (
        "INVALID_ARGUMENT DATASET_HEADER_INVALID: invalid dataset header: "
        "benchmark_version: must be a semantic version, e.g. 1.0.0"
    )
    upload = ["datasets", "upload", str(data), "--name", "d", "--task-type", "classification"]
    code, _, err = run_cli(capsys, *upload, "--version", "1.0", "--server", server)
    assert (code, err) == (
        1,
        "evald: error: --version: must be a semantic version, e.g. 1.0.0 "
        "(INVALID_ARGUMENT DATASET_HEADER_INVALID)\n",
    )
    code, _, err = run_cli(
        capsys, *upload, "--version", "1.0.0", "--prompt-template", "Classify.", "--server", server
    )
    assert code == 1
    assert err.startswith("evald: error: --prompt-template: has no placeholder, so every")
    assert err.count("placeholder") == 1
    spec = _spec(tmp_path, "sim-ok", 0)
    code, _, err = run_cli(capsys, "submit", spec, "--request-id", "r" * 129, "--server", server)
    assert (code, err) == (
        1,
        "evald: error: --request-id: must be 1-128 characters "
        "(INVALID_ARGUMENT INVALID_ARGUMENT)\n",
    )
    # A problem in the data is the server's to name: line and field, said once.
    data.write_text('{"input": "a", "label": "pos", "label": "neg"}\n', encoding="utf-8")
    code, _, err = run_cli(capsys, *upload, "--version", "1.0.0", "--server", server)
    assert code == 1
    assert err == (
        "evald: error: INVALID_ARGUMENT DATASET_PARSE_ERROR: line 1, field 'label': the key "
        "'label' appears twice in one object (gold data must not be ambiguous)\n"
    )
