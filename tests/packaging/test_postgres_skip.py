"""Without PostgreSQL the PostgreSQL tests skip and say why — the URL and the cause in
pytest's summary — while the SQLite half of the conformance suite still runs; under
``CI=true`` a missing PostgreSQL fails them instead."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOWHERE = "postgresql://nobody@127.0.0.1:1/postgres"  # port 1: nothing listens


def _pytest(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/store/test_conformance.py",
            "-k",
            "quota",
        ],
        cwd=ROOT,
        env={**os.environ, "EVALD_TEST_PG": NOWHERE, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("ci", ["", "false"])
def test_without_postgresql_its_tests_skip_naming_the_url(ci: str) -> None:
    done = _pytest({"CI": ci})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 skipped" in done.stdout
    assert "SKIPPED [1] tests/store/test_conformance.py" in done.stdout
    assert f"PostgreSQL not reachable at {NOWHERE}" in done.stdout


def test_under_ci_a_missing_postgresql_fails() -> None:
    done = _pytest({"CI": "true"})
    assert done.returncode != 0
    assert f"PostgreSQL not reachable at {NOWHERE}" in done.stdout
    assert "CI=true requires it" in done.stdout
