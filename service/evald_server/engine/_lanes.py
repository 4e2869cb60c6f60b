"""A lane: one model's buffer of claimed subtasks, per run, and its bookkeeping.

The feeder fills the buffer page by page (claims from the store) and the model's
workers take from it round-robin across runs, skipping a run whose own limit is full,
so that two runs on one model both progress and a run limit never blocks a worker.
"""

from collections import deque
from dataclasses import dataclass

import anyio

from evald_server.engine._limits import Limit, Limiter
from evald_server.providers import Provider, SimulatedProvider
from evald_server.store import ClaimedSubtask


@dataclass(slots=True)
class LaneRun:
    """A run that may have ready work for this lane's model."""

    version: int = 0  # bumped whenever new work may have appeared
    next_retry_at: float | None = None  # None: claim now; else nothing ready before then

    def runnable(self, now: float) -> bool:
        return self.next_retry_at is None or self.next_retry_at <= now


class Lane:
    def __init__(self, model_id: str, provider: Provider, limit: Limit, workers: int) -> None:
        self.model_id = model_id
        self.provider = provider
        # Only the simulator may see the record's answer; skip building it for others.
        self.needs_reference = isinstance(provider, SimulatedProvider)
        self.limit = limit
        self.workers = workers
        self.low_water = workers  # refill below this many buffered subtasks
        self.high_water = 2 * workers  # claim up to this many
        self.runs: dict[str, LaneRun] = {}
        self.claim_order: deque[str] = deque()
        self.buffers: dict[str, deque[ClaimedSubtask]] = {}
        self._take_order: deque[str] = deque()
        self.buffered = 0
        self.closed = False
        self._items_changed = anyio.Event()
        self.feeder_wake = anyio.Event()

    # -- work registry (feeder side) ---------------------------------------------------

    def add_work(self, run_id: str, due: float | None = None) -> None:
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = LaneRun(next_retry_at=due)
            self.claim_order.append(run_id)
        elif due is None:
            run.next_retry_at = None
        elif run.next_retry_at is not None:
            run.next_retry_at = min(run.next_retry_at, due)
        run.version += 1
        self.wake_feeder()

    def forget(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        if run_id in self.claim_order:
            self.claim_order.remove(run_id)

    def wake_feeder(self) -> None:
        self.feeder_wake.set()  # the feeder takes a fresh event before each round

    # -- buffer (workers side) ---------------------------------------------------------

    def buffered_for(self, run_id: str) -> int:
        buffer = self.buffers.get(run_id)
        return 0 if buffer is None else len(buffer)

    def add(self, run_id: str, items: tuple[ClaimedSubtask, ...]) -> None:
        buffer = self.buffers.get(run_id)
        if buffer is None:
            buffer = self.buffers[run_id] = deque()
        if run_id not in self._take_order:  # a handful of runs: a scan is cheap
            self._take_order.append(run_id)
        buffer.extend(items)
        self.buffered += len(items)
        self.items_changed()

    def drop(self, run_id: str) -> list[ClaimedSubtask]:
        """Remove and return a run's buffered subtasks."""
        buffer = self.buffers.pop(run_id, None)
        if buffer is None:
            return []
        self.buffered -= len(buffer)
        return list(buffer)

    def drop_all(self) -> list[ClaimedSubtask]:
        items = [item for run_id in list(self.buffers) for item in self.drop(run_id)]
        self._take_order.clear()
        return items

    def items_changed(self) -> None:
        self._items_changed.set()
        self._items_changed = anyio.Event()

    def close(self) -> None:
        self.closed = True
        self.items_changed()
        self.wake_feeder()

    def try_take(self, limiter: Limiter) -> tuple[ClaimedSubtask, Limit | None] | None:
        for _ in range(len(self._take_order)):
            run_id = self._take_order.popleft()
            buffer = self.buffers.get(run_id)
            if not buffer:
                self.buffers.pop(run_id, None)
                continue  # drained or dropped: leaves the rotation
            run_limit = limiter.run(run_id)
            if run_limit is not None and not run_limit.try_acquire():
                self._take_order.append(run_id)
                continue
            item = buffer.popleft()
            self.buffered -= 1
            if buffer:
                self._take_order.append(run_id)
            else:
                del self.buffers[run_id]
            if self.buffered < self.low_water:
                self.wake_feeder()
            return item, run_limit
        return None

    async def take(self, limiter: Limiter) -> tuple[ClaimedSubtask, Limit | None] | None:
        """The next subtask (holding its run's slot, if the run has a limit), or None
        once the lane is closed."""
        while not self.closed:
            picked = self.try_take(limiter)
            if picked is not None:
                return picked
            await self._items_changed.wait()
        return None
