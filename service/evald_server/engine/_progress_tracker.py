"""Coalesced progress snapshots: per run, one per second or per 50 completions, whichever
comes first, and never more than five a second.

The committer reports how many subtasks each batch finished per run; this tracker
counts them and, off the hot path, appends a ``progress`` event (run totals read from
the store, one row per task, throughput and ETA) when 50 have accumulated or a second
has passed since the run's last snapshot, or at once when a task's inference ends.
"""

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import anyio
import anyio.abc

from evald_server.engine._progress import RunProgress
from evald_server.store import EventKind, EventRow, NewEvent, Store


@dataclass(slots=True)
class _RunTally:
    since_snapshot: int = 0
    last_snapshot: float = 0.0  # monotonic
    rate_per_s: float = 0.0
    forced: bool = False


class ProgressTracker:
    def __init__(
        self,
        store: Store,
        publish: Callable[[Iterable[EventRow]], None],
        *,
        every_s: float = 1.0,
        every_n: int = 50,
        min_gap_s: float = 0.2,
    ) -> None:
        self._store = store
        self._publish = publish
        self._every_s = every_s
        self._every_n = every_n
        self._min_gap_s = min_gap_s
        self._tallies: dict[str, _RunTally] = {}
        self._wake = anyio.Event()
        self.snapshots = 0

    def completed(self, per_run: Mapping[str, int], *, force: Iterable[str] = ()) -> None:
        now = time.monotonic()
        due = False
        for run_id, count in per_run.items():
            tally = self._tallies.get(run_id)
            if tally is None:
                tally = self._tallies[run_id] = _RunTally(last_snapshot=now)
            tally.since_snapshot += count
            due = due or tally.since_snapshot >= self._every_n
        for run_id in force:
            self._tallies.setdefault(run_id, _RunTally(last_snapshot=now)).forced = True
            due = True
        if due:
            self._wake.set()

    def forget(self, run_id: str) -> None:
        self._tallies.pop(run_id, None)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        while True:
            with anyio.move_on_after(self._min_gap_s):
                await self._wake.wait()
            self._wake = anyio.Event()
            now = time.monotonic()
            for run_id, tally in list(self._tallies.items()):
                elapsed = now - tally.last_snapshot
                # 50 completions or a second, whichever first, but never more than
                # five a second: a fast run would otherwise write dozens a second.
                full = tally.since_snapshot >= self._every_n and elapsed >= self._min_gap_s
                stale = tally.since_snapshot > 0 and elapsed >= self._every_s
                if full or stale or tally.forced:
                    await self._snapshot(run_id, tally, now)

    async def _snapshot(self, run_id: str, tally: _RunTally, now: float) -> None:
        elapsed = max(now - tally.last_snapshot, 1e-6)
        completed = tally.since_snapshot
        current = completed / elapsed
        tally.rate_per_s = current if tally.rate_per_s == 0 else 0.5 * (tally.rate_per_s + current)
        tally.since_snapshot = 0
        tally.last_snapshot = now
        tally.forced = False
        run = await self._store.get_run(run_id)
        if run is None or run.state.is_terminal:
            self._tallies.pop(run_id, None)
            return
        tasks = await self._store.get_tasks(run_id)
        progress = RunProgress.of(
            run,
            tasks,
            throughput_per_s=tally.rate_per_s,
            now=time.time(),
            completed_since_last=completed,
        )
        event = NewEvent(EventKind.PROGRESS, progress.to_json(), time.time())
        rows = await self._store.append_events(run_id, [event], live_only=True)
        self.snapshots += 1
        self._publish(rows)
