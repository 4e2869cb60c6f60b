"""The client distribution (clients/pyproject.toml) alone: built into a wheel, installed
into a fresh virtual environment with nothing else, it runs a whole flow against a
server, and none of the server's or the CLI's dependencies came with it."""

import shutil
import subprocess
import sys
import textwrap
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness import server_process

CLIENTS = Path(__file__).resolve().parents[2] / "clients"
ALLOWED = {"evald-client", "grpcio", "protobuf", "googleapis-common-protos", "anyio"}
# What anyio itself pulls in on Python 3.11.
ALLOWED_TRANSITIVE = {"idna", "sniffio", "typing-extensions", "typing_extensions", "exceptiongroup"}

FLOW = textwrap.dedent(
    """
    import importlib.util, sys
    absent = ["evald_server", "evald_cli", "aiohttp", "numpy", "rouge_score", "rich", "pydantic"]
    present = [name for name in absent if importlib.util.find_spec(name) is not None]
    assert not present, f"installed with the client: {present}"
    from evald_client import EvaldClient, NotFound
    with EvaldClient(sys.argv[1]) as evald:
        evald.upload_dataset(name="alone", version="1.0.0", task_type="qa",
                             records=[{"question": f"q{i}", "answers": ["a"]} for i in range(6)])
        run = evald.create_run(models=["sim-good"], datasets=[("alone", "1.0.0")])
        assert evald.wait(run.run_id, timeout_s=60).state.value == "succeeded"
        (result,) = evald.results(run.run_id)
        assert set(result.metrics) >= {"exact_match", "f1"}
        comparison = evald.compare_runs(baseline_run_id=run.run_id, candidate_run_id=run.run_id)
        assert comparison.tasks[0].paired_samples == 6
        try:
            evald.get_run("run_missing")
        except NotFound as error:
            assert error.reason == "RUN_NOT_FOUND"
    print("client flow ok")
    """
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with server_process(tmp_path) as address:
        yield address


def _pip(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.timeout(600)
def test_the_client_wheel_installs_alone_and_runs_a_flow(server: str, tmp_path: Path) -> None:
    # Build from a copy: setuptools leaves build/ and *.egg-info beside the sources.
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(CLIENTS / "pyproject.toml", source)
    for package in ("evald_client", "evald"):
        shutil.copytree(
            CLIENTS / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    wheels = tmp_path / "wheels"
    _pip("wheel", "--quiet", "--no-deps", "--no-build-isolation", str(source), "-w", str(wheels))
    (wheel,) = wheels.glob("evald_client-*.whl")

    # A fresh environment without pip; this interpreter's pip installs into it, from the
    # package index this machine is configured with.
    environment = tmp_path / "clean"
    venv.EnvBuilder(with_pip=False).create(environment)
    python = environment / "bin" / "python"
    _pip("--python", str(python), "install", "--quiet", "--find-links", str(wheels), str(wheel))
    listed = _pip("--python", str(python), "list", "--format", "freeze").stdout.split()
    installed = {line.split("==")[0].lower() for line in listed}
    assert installed - ALLOWED - ALLOWED_TRANSITIVE == set()
    assert installed >= ALLOWED

    done = subprocess.run(
        [str(python), "-c", FLOW, server],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "client flow ok"
