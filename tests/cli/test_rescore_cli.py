"""``evald rescore`` and reducers in ``evald submit`` / ``evald results`` against a real
server process (simulated models), on a real SQLite file."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evald_cli._demo import sample_data_dir
from evald_cli.main import main
from tests.harness import ServerProcess, config_data, write_config

SPEC = """
name = "repeated"
models = ["sim-good"]
datasets = ["arith@1.0.0"]
repeat = 3
reducers = ["pass@1", "pass@3"]
"""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    process = ServerProcess(write_config(tmp_path, config_data(tmp_path)))
    address = process.start()
    try:
        yield address
    finally:
        process.terminate()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_submit_with_reducers_then_rescore_with_others(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = sample_data_dir() / "arithmetic_generation.jsonl"
    code, _, _ = _cli(
        capsys, "datasets", "upload", str(data), "--name", "arith", "--version", "1.0.0",
        "--task-type", "generation", "--server", server,
    )  # fmt: skip
    assert code == 0
    spec = tmp_path / "run.toml"
    spec.write_text(SPEC, encoding="utf-8")
    code, out, _ = _cli(capsys, "submit", str(spec), "--watch", "--server", server)
    assert code == 0, out
    source = out.splitlines()[0]
    code, out, _ = _cli(capsys, "results", source, "--server", server)
    assert "pass@1" in out
    assert "pass@3" in out

    code, out, err = _cli(
        capsys, "rescore", source, "--reducer", "majority", "--reducer", "pass^2",
        "--watch", "--server", server,
    )  # fmt: skip
    assert code == 0, err
    rescored = out.splitlines()[0]
    assert rescored != source
    code, out, _ = _cli(capsys, "results", rescored, "--json", "--server", server)
    (result,) = json.loads(out)["results"]
    assert [m["name"] for m in result["reducedMetrics"]] == ["majority", "pass^2"]
    assert result["provenance"]["rescoredFromRunId"] == source

    # A setting the server refuses names the flag it came from; a bad spelling never
    # reaches the server.
    code, _, err = _cli(capsys, "rescore", source, "--reducer", "pass@4", "--server", server)
    assert code == 1
    assert "--reducer pass@4:" in err
    assert "more than the run's repeat (3)" in err
    code, _, err = _cli(capsys, "rescore", source, "--reducer", "best", "--server", server)
    assert code == 1
    assert "--reducer: unknown reducer 'best'" in err
