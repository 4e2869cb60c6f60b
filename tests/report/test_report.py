"""``evald report`` on real runs, opened in a real headless Chromium: the page loads
without a console message (no script, no blocked resource), every figure is in the
DOM, and a screenshot is written."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evald_cli.main import main
from tests.comparison._known_runs import KnownRuns

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
    "--enable-logging=stderr", "--v=0",
]  # fmt: skip
CONSOLE = re.compile(r":CONSOLE[:(]")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing in CI: .ci/run installs it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium); CI installs it")
    return found


def _open(page: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run(
        [_chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def _report(capsys: pytest.CaptureFixture[str], path: Path, *argv: str) -> str:
    assert main(["report", *argv, "-o", str(path)]) == 0
    assert f"wrote {path}" in capsys.readouterr().out
    return path.read_text(encoding="utf-8")


def test_the_report_is_one_self_contained_file(
    runs: KnownRuns, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    html = _report(capsys, tmp_path / "r.html", runs.flaky, "--server", runs.address)
    assert "<script" not in html
    assert not re.search(r"\b(src|href)=", html)  # nothing to fetch
    assert "default-src 'none'" in html  # and the page forbids fetching anything
    assert not re.search(r"https?://(?!www.w3.org/2000/svg\")", html)
    assert "PROVIDER_HTTP_5XX" in html  # failures by reason: the flaky model's faults
    assert 'data-figure="failures"' in html


def test_the_report_renders_in_chromium_without_console_errors(
    runs: KnownRuns, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    _report(capsys, page, runs.weaker, "--baseline", runs.baseline, "--server", runs.address)
    loaded = _open(page, tmp_path, "--dump-dom")
    assert loaded.returncode == 0, loaded.stderr
    console = [line for line in loaded.stderr.splitlines() if CONSOLE.search(line)]
    assert console == []
    dom = loaded.stdout
    figures = re.findall(r'data-figure="([a-z-]+)"', dom)
    assert figures.count("forest-plot") == 1
    assert figures.count("confusion-matrix") == 1  # the classification task
    assert figures.count("histogram") == 1  # one model in the run
    assert figures.count("bars") == 1  # F1 per class
    assert dom.count("<circle") == 6  # one delta per compared metric (4 + 2)
    assert "Against baseline" in dom
    assert "[0." in dom  # intervals beside the values

    shot = tmp_path / "report.png"
    taken = _open(page, tmp_path, "--window-size=1200,2400", f"--screenshot={shot}")
    assert taken.returncode == 0, taken.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a rendered page, not a blank one


def test_a_console_error_would_be_caught(tmp_path: Path) -> None:
    """The check above can fail: a page that breaks its own policy logs to the console."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'\"></head><body><script>1</script></body></html>"
    )
    loaded = _open(page, tmp_path, "--dump-dom")
    assert any(CONSOLE.search(line) for line in loaded.stderr.splitlines())
