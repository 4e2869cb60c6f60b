"""Where a process's CPU goes: py-spy samples of every thread, sorted into the server's jobs.

``sample(pid, path)`` runs ``py-spy record`` on a live process (raw collapsed stacks,
one line per distinct stack with its sample count; idle threads are not sampled) and
``breakdown(path)`` sorts each sample into one category: the innermost frame that
belongs to one of evald's jobs decides (a socket write inside aiohttp is the provider
call, a ``CounterDeltas.apply`` inside the group commit is counters). Samples whose
frames are all asyncio, anyio or the standard library are the event loop itself.

py-spy's idle detection does not see every wait here (``--nonblocking`` reads the
stacks without stopping the process), so samples whose innermost frame is a wait — the
loop's ``select``, a store thread waiting for its next job — are counted as ``idle``
and left out of the shares. A thread waiting for the GIL still looks busy: the
hand-over between the event loop and the store threads (``DbThread.call`` /
``_deliver``) is its own category for that reason.
"""

import contextlib
import inspect
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

# (category, substrings of "function (file:line)"): the first rule that matches the
# innermost frame with any match wins, so the specific rules come first.
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("store hand-off (queue, GIL)", ("DbThread.call", "_deliver (", "_write_to_self")),
    ("counters", ("CounterDeltas",)),
    ("events", ("append_events", "state_event", "failure_event", "engine/_events.py")),
    ("progress", ("engine/_progress", "_progress_tracker")),
    ("outcome encoding", ("error_json", "dumps (", "outcome_of (", "SubtaskOutcome", "to_json")),
    (
        "claim",
        ("claim_ready (", "claimed_subtasks (", "_claim (", "_fill (", "_feed (", "_accept ("),
    ),
    (
        "group commit",
        ("record_outcomes (", "store/_outcomes.py", "engine/_committer.py", "sqlite/_common.py"),
    ),
    ("prompt rendering", ("datasets/_prompts.py", "datasets/_chat.py", "simulator_reference")),
    ("provider call", ("providers/", "aiohttp/", "multidict", "yarl/", "propcache")),
    ("scoring (server side)", ("scoring/", "engine/_watcher.py", "engine/_results.py")),
    (
        "watch and gRPC",
        ("grpc", "api/_servicer", "api/_convert", "api/_handlers", "api/_auth", "app/"),
    ),
    ("dispatch (lanes, limits, workers)", ("engine/",)),
    ("store (other)", ("store/",)),
)
LOOP = "event loop (asyncio, anyio, other)"
IDLE = "idle"


def _idle_leaves() -> tuple[str, ...]:
    from evald_server.store.sqlite._db_thread import DbThread

    lines, first = inspect.getsourcelines(DbThread._main)
    get = next(first + i for i, line in enumerate(lines) if "self._jobs.get()" in line)
    return (
        "EpollSelector.select",
        f"DbThread._main (evald_server/store/sqlite/_db_thread.py:{get})",
        "Condition.wait",
        "Event.wait",
        "Thread.join",
        "_poll_wrapper",
    )


IDLE_LEAVES = _idle_leaves()


def _py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"  # installed in the venv
    return str(beside) if beside.exists() else shutil.which("py-spy")


def available() -> bool:
    return _py_spy() is not None


@contextlib.contextmanager
def sample(pid: int, path: Path, rate: int = 250) -> Iterator[None]:
    """Sample ``pid`` while the block runs; the stacks are in ``path`` afterwards."""
    binary = _py_spy()
    if binary is None:
        raise RuntimeError("py-spy is not installed (pip install py-spy)")
    recorder = subprocess.Popen(
        [
            binary,
            "record",
            "--pid",
            str(pid),
            "--rate",
            str(rate),
            "--format",
            "raw",
            "--threads",
            "--nonblocking",
            "--output",
            str(path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)  # py-spy writes what it has and exits
        try:
            recorder.wait(timeout=30)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()


def _category(frames: list[str]) -> str:
    if frames and any(leaf in frames[-1] for leaf in IDLE_LEAVES):
        return IDLE
    for frame in reversed(frames):  # innermost first
        for name, needles in RULES:
            if any(needle in frame for needle in needles):
                return name
    return LOOP


def breakdown(path: Path) -> dict[str, int]:
    """Samples per category (and per thread, as ``thread: <name>``)."""
    counts: Counter[str] = Counter()
    for line in path.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        thread, frames = frames[0].rpartition(": ")[2], frames[1:]
        category = _category(frames)
        counts[category] += int(count)
        if category != IDLE:
            counts[f"thread: {thread}"] += int(count)
    return dict(counts)


def shares_us(counts: dict[str, int], cpu_us_per_subtask: float) -> dict[str, float]:
    """Each category's share of the samples, as µs of CPU per subtask."""
    jobs = {k: v for k, v in counts.items() if not k.startswith("thread: ") and k != IDLE}
    total = sum(jobs.values())
    if total == 0:
        return {}
    ordered = sorted(jobs.items(), key=lambda kv: -kv[1])
    return {name: round(cpu_us_per_subtask * n / total, 1) for name, n in ordered}
