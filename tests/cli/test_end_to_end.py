"""The real thing in subprocesses: ``evald serve`` on a free loopback port and the CLI
against it, and ``evald demo`` start to finish leaving nothing running."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evald_cli._demo import demo_config, sample_data_dir, sandbox_possible

EVALD = [sys.executable, "-m", "evald_cli"]
READY = "evald listening on "


def _evald(*argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EVALD, *argv], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """``evald serve`` with the demo's simulated models (latencies ×0.05); its address."""
    config = tmp_path / "evald.toml"
    config.write_text(demo_config(tmp_path, latency_scale=0.05), encoding="utf-8")
    out_path = tmp_path / "server.out"
    with out_path.open("wb") as out, (tmp_path / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [*EVALD, "serve", "--config", str(config)], stdout=out, stderr=log
        )
    try:
        deadline = time.monotonic() + 60
        first = ""
        while time.monotonic() < deadline and process.poll() is None:
            first = out_path.read_text().partition("\n")[0]
            if first.startswith(READY):
                break
            time.sleep(0.05)
        assert first.startswith(READY), (tmp_path / "server.log").read_text()
        yield first.removeprefix(READY)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.slow
def test_upload_submit_watch_results_samples(server: str, tmp_path: Path) -> None:
    sentiment = sample_data_dir() / "sentiment.jsonl"
    done = _evald(
        "datasets",
        "upload",
        str(sentiment),
        "--name",
        "sentiment",
        "--version",
        "1.0.0",
        "--task-type",
        "classification",
        "--server",
        server,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("uploaded sentiment@1.0.0: classification, 30 records")

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "fine", "label": "positive"}\n{"input": "no label"}\n')
    done = _evald(
        "datasets",
        "upload",
        str(bad),
        "--name",
        "bad",
        "--version",
        "1.0.0",
        "--task-type",
        "classification",
        "--server",
        server,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("evald: error: INVALID_ARGUMENT DATASET_")
    assert done.stderr.count("\n") == 1

    spec = tmp_path / "run.toml"
    spec.write_text(
        'name = "e2e"\nmodels = ["sim-large", "sim-small"]\ndatasets = ["sentiment@1.0.0"]\n'
    )
    done = _evald("submit", str(spec), "--watch", "--server", server)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    run_id = lines[0]
    assert lines[-1] == f"run {run_id}: succeeded"
    assert "sentiment@1.0.0 (classification)" in done.stdout

    done = _evald("results", run_id, "--json", "--server", server)
    assert done.returncode == 0, done.stderr
    results = json.loads(done.stdout)["results"]  # the proto3 JSON of ListResultsResponse
    assert sorted(r["model"]["modelId"] for r in results) == ["sim-large", "sim-small"]
    for result in results:
        assert result["status"] == "RESULT_STATUS_SUCCESS"
        assert 0.0 <= result["metricsSummary"]["accuracy"] <= 1.0
        assert result["executionProfile"]["samplesSucceeded"] == "30"  # int64: a string
        assert "classification" in result

    done = _evald("samples", run_id, "--limit", "5", "--json", "--server", server)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) == 5
    done = _evald("samples", run_id, "--json", "--server", server)
    assert len(json.loads(done.stdout)) == 60, "--json without --limit returns every sample"

    done = _evald("watch", "run_does_not_exist", "--server", server)
    assert done.returncode == 1
    assert done.stderr.startswith("evald: error: NOT_FOUND RUN_NOT_FOUND")


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for leftovers")
def test_demo_runs_start_to_finish_and_leaves_nothing_running() -> None:
    done = _evald("demo", "--latency-scale", "0.05", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for name in ("sentiment", "reading_qa", "news_ner", "local_news_summaries"):
        assert f"uploaded {name}@1.0.0" in out
        assert f"{name}@1.0.0 (" in out  # its results table
    assert "arithmetic_generation@1.0.0 (generation)" in out
    if sandbox_possible() is None:  # the code dataset's programs ran in the sandbox
        assert "python_functions@1.0.0 (code)" in out
        assert "passed" in out.split("python_functions@1.0.0 (code)", 1)[1]
    else:
        assert "the code dataset is left out" in out
    assert out.rstrip().endswith("server stopped")
    workdir = next(
        line.removeprefix("demo directory ").strip()
        for line in out.splitlines()
        if line.startswith("demo directory ")
    )
    assert not Path(workdir).exists()
    assert _processes_mentioning(workdir) == []
