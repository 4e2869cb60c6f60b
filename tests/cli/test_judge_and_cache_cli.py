"""The CLI's judge options, cache switch and hit rates against a real server process
(simulated models: the judge answers well-formed verdicts), on a real SQLite file."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evald_cli._demo import sample_data_dir
from evald_cli.main import main
from tests.harness import ServerProcess, config_data, write_config

SPEC = """
name = "judged"
models = ["sim-good"]
datasets = ["arith@1.0.0"]
response_cache = false

[judge]
model = "sim-weak"
rubric = "Grade {output} against {reference} for: {input}"
rounds = 2
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    process = ServerProcess(write_config(tmp_path, config_data(tmp_path)))
    address = process.start()
    try:
        yield address
    finally:
        process.terminate()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    assert captured.err == ""
    return code, captured.out


def test_submit_a_judged_run_then_the_same_from_the_cache(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = sample_data_dir() / "arithmetic_generation.jsonl"
    code, _ = _cli(
        capsys, "datasets", "upload", str(data), "--name", "arith", "--version", "1.0.0",
        "--task-type", "generation", "--server", server,
    )  # fmt: skip
    assert code == 0
    records = sum(1 for line in data.read_text().splitlines() if line.strip())
    spec = tmp_path / "run.toml"
    spec.write_text(SPEC, encoding="utf-8")

    code, out = _cli(capsys, "submit", str(spec), "--watch", "--cache", "--server", server)
    assert code in (0, 3), out
    first = out.splitlines()[0]
    assert "judge_pass_rate=" in out
    assert "judge_agreement_rate=" in out
    assert f"cache hits 0/{records} (0%)" in out, "the dashboard shows the hit rate"

    code, out = _cli(capsys, "submit", str(spec), "--watch", "--cache", "--server", server)
    second = out.splitlines()[0]
    assert f"cache hits {records}/{records} (100%)" in out
    code, out = _cli(capsys, "results", second, "--server", server)
    assert "cache hits" in out
    assert f"{records}/{records} (100%)" in out
    code, out = _cli(capsys, "results", second, "--json", "--server", server)
    (result,) = json.loads(out)["results"]
    assert {"judge_pass_rate", "judge_agreement_rate"} <= set(result["metricsSummary"])
    assert result["provenance"]["judge"]["rounds"] == 2
    assert int(result["executionProfile"]["cacheHits"]) == records

    # Without the flag the spec's own switch (off) holds: nothing comes from the cache.
    code, out = _cli(capsys, "submit", str(spec), "--watch", "--server", server)
    third = out.splitlines()[0]
    assert "cache hits" not in out
    code, out = _cli(capsys, "results", third, "--json", "--server", server)
    (result,) = json.loads(out)["results"]
    assert int(result["executionProfile"].get("cacheHits", 0)) == 0
    assert len({first, second, third}) == 3
