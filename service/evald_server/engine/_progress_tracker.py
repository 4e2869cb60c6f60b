"""Coalesced progress snapshots: per run, one per second or per 50 completions, whichever
comes first, and never more than five a second.

The committer reports how many subtasks each batch finished per run; this tracker
counts them and, off the hot path, appends a ``progress`` event (run totals read from
the store, one row per task, one row per model, throughput and ETA) when 50 have
accumulated or a second has passed since the run's last snapshot, or at once when a
task's inference ends or a stall is seen. A failed call (a retry scheduled) makes a
snapshot due too, so that a model that cannot be reached shows its error within
about a second, before anything completes.

Throughput is what completed over a sliding window (``window_s``), measured from when
the run's work was handed to the dispatcher, not from its first completion: calls
finish in bursts of the concurrency, and a rate from the first burst onwards reads
2-3x too high early in a slow run. Until ``min_completed`` subtasks have completed and
``min_span_s`` has passed, the rate is *not known*: no throughput, no ETA.
"""

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.abc

from evald_server.domain import EventKind
from evald_server.engine._progress import ModelActivity, RunProgress
from evald_server.store import EventRow, NewEvent, Store, TaskRow

ModelActivityFn = Callable[[str, Sequence[str]], Sequence[ModelActivity]]


@dataclass(slots=True)
class _RunTally:
    started: float  # monotonic: when the run's work was handed to the dispatcher
    since_snapshot: int = 0
    last_snapshot: float = 0.0  # monotonic
    forced: bool = False
    touched: bool = False  # something other than a completion happened (a failed call)
    window: deque[tuple[float, int]] = field(default_factory=deque)  # (monotonic, count)
    completed: int = 0


class ProgressTracker:
    def __init__(
        self,
        store: Store,
        publish: Callable[[Iterable[EventRow]], None],
        *,
        every_s: float = 1.0,
        every_n: int = 50,
        min_gap_s: float = 0.2,
        window_s: float = 30.0,
        min_completed: int = 3,
        min_span_s: float = 2.0,
        calls: Mapping[str, int] | None = None,
        activity: ModelActivityFn | None = None,
    ) -> None:
        self._store = store
        self._publish = publish
        self._every_s = every_s
        self._every_n = every_n
        self._min_gap_s = min_gap_s
        self._window_s = window_s
        self._min_completed = min_completed
        self._min_span_s = min_span_s
        self._calls: Mapping[str, int] = calls if calls is not None else {}
        self._activity = activity
        self._tallies: dict[str, _RunTally] = {}
        self._wake = anyio.Event()
        self.snapshots = 0

    def _tally(self, run_id: str, now: float) -> _RunTally:
        tally = self._tallies.get(run_id)
        if tally is None:
            tally = self._tallies[run_id] = _RunTally(started=now, last_snapshot=now)
        return tally

    def started(self, run_id: str) -> None:
        """The run's work was handed to the dispatcher: its rate is measured from now."""
        now = time.monotonic()
        tally = self._tally(run_id, now)
        if tally.completed == 0:
            tally.started = now

    def completed(self, per_run: Mapping[str, int], *, force: Iterable[str] = ()) -> None:
        now = time.monotonic()
        due = False
        for run_id, count in per_run.items():
            tally = self._tally(run_id, now)
            tally.since_snapshot += count
            tally.completed += count
            tally.window.append((now, count))
            due = due or tally.since_snapshot >= self._every_n
        for run_id in force:
            self._tally(run_id, now).forced = True
            due = True
        if due:
            self._wake.set()

    def touch(self, run_ids: Iterable[str]) -> None:
        """Something worth showing happened to these runs (a failed call): a snapshot is
        due within ``every_s``."""
        now = time.monotonic()
        for run_id in run_ids:
            self._tally(run_id, now).touched = True

    def force(self, run_ids: Iterable[str]) -> None:
        """Snapshot these runs now (a stall began or ended)."""
        self.completed({}, force=run_ids)

    def forget(self, run_id: str) -> None:
        self._tallies.pop(run_id, None)

    def rate(self, run_id: str, now: float | None = None) -> float | None:
        """Completions per second over the window; None while not known."""
        tally = self._tallies.get(run_id)
        if tally is None:
            return None
        now = time.monotonic() if now is None else now
        start = max(tally.started, now - self._window_s)
        while tally.window and tally.window[0][0] < start:
            tally.window.popleft()
        span = now - start
        in_window = sum(count for _, count in tally.window)
        if tally.completed < self._min_completed or span < self._min_span_s or in_window == 0:
            return None
        return in_window / span

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
                active = tally.since_snapshot > 0 or tally.touched
                stale = active and elapsed >= self._every_s
                if full or stale or tally.forced:
                    await self._snapshot(run_id, tally, now)

    async def _snapshot(self, run_id: str, tally: _RunTally, now: float) -> None:
        completed = tally.since_snapshot
        tally.since_snapshot = 0
        tally.last_snapshot = now
        tally.forced = tally.touched = False
        run = await self._store.get_run(run_id)
        if run is None or run.state.is_terminal:
            self._tallies.pop(run_id, None)
            return
        tasks = await self._store.get_tasks(run_id)
        progress = RunProgress.of(
            run,
            tasks,
            throughput_per_s=self.rate(run_id, now),
            now=time.time(),
            completed_since_last=completed,
            calls=self._calls,
            models=self.activity(run_id, tasks),
        )
        event = NewEvent(EventKind.PROGRESS, progress.to_json(), time.time())
        rows = await self._store.append_events(run_id, [event], live_only=True)
        self.snapshots += 1
        self._publish(rows)

    def activity(self, run_id: str, tasks: Sequence[TaskRow]) -> Sequence[ModelActivity]:
        if self._activity is None:
            return ()
        return self._activity(run_id, sorted({t.model_id for t in tasks}))
