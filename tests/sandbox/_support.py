"""What the sandbox tests share: small limits, the skip-or-fail rule, process scans.

The tests need bubblewrap, root and an architecture with a seccomp table; outside CI a
machine without them skips these tests, under ``CI=true`` they fail (.ci/run installs
bubblewrap with ``make bubblewrap``).
"""

import os
from pathlib import Path

import pytest

from evald_server.sandbox import Sandbox, SandboxSettings, missing_prerequisites

MiB = 1 << 20
# Each slot runs under its own host uid, and a test checks that no process of those uids
# is left: parallel test workers (pytest-xdist's gw0, gw1 …) each take their own range,
# as two servers on one host must.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
# Small limits keep the hostile corpus short. The wall-clock deadline is generous for
# programs that end by themselves (the machine may be busy); tests of the deadline
# itself use ``SHORT_WALL_S``.
SETTINGS = SandboxSettings(
    enabled=True,
    slots=2,
    wall_timeout_s=60.0,
    cpu_seconds=2,
    memory_bytes=256 * MiB,
    processes=8,
    file_size_bytes=1 * MiB,
    open_files=32,
    tmpfs_bytes=4 * MiB,
    output_bytes=4096,
    traceback_lines=8,
    uid_base=SandboxSettings().uid_base + 1000 * _WORKER,
)
SHORT_WALL_S = 4.0


def require_sandbox(settings: SandboxSettings = SETTINGS) -> None:
    missing = missing_prerequisites(settings)
    if missing:
        reason = "the code sandbox cannot run here: " + "; ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI: .ci/run installs bubblewrap)", pytrace=False)
        pytest.skip(reason)


def sandbox(**changes: object) -> Sandbox:
    """A sandbox with the tests' settings, ``changes`` applied."""
    require_sandbox()
    fields = {name: getattr(SETTINGS, name) for name in SETTINGS.__dataclass_fields__}
    fields.update(changes)
    return Sandbox(SandboxSettings(**fields))  # type: ignore[arg-type]


def processes_of_uids(uids: range) -> list[int]:
    """Host pids whose real uid is in ``uids`` (the sandbox slots' processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue  # gone meanwhile
        for line in status.splitlines():
            if line.startswith("Uid:"):
                if int(line.split()[1]) in uids:
                    found.append(int(entry.name))
                break
    return found


def slot_uids(settings: SandboxSettings = SETTINGS) -> range:
    return range(settings.uid_base, settings.uid_base + settings.slots)
