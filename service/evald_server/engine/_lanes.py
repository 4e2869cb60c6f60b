"""A lane: one model's buffer of claimed subtasks, per run, and its bookkeeping.

The feeder fills the buffer page by page (claims from the store) and the model's
workers take from it round-robin across runs, skipping a run whose own limit is full,
so that two runs on one model both progress and a run limit never blocks a worker.

A run limit is shared by every lane of the run, so a lane can hold work that only
another lane's release unblocks: the dispatcher wakes every lane holding that run's
work when one of its slots is freed, and the water marks count only *takeable* work
(of runs whose limit has a free slot), so that work blocked by a run limit never stops
the feeder from claiming other runs' work for idle workers.
"""

from collections import Counter, deque
from dataclasses import dataclass

import anyio

from evald_server.domain import EvalError, OutcomeKind
from evald_server.engine._limits import RUN_LIMIT as RUN_LIMIT_NAME
from evald_server.engine._limits import Limit, Limiter
from evald_server.providers import Provider
from evald_server.store import ClaimedSubtask, SubtaskOutcome


@dataclass(frozen=True, slots=True)
class LaneState:
    """What one model's lane is doing, as progress events and stall warnings show it."""

    model_id: str
    capacity: int  # the model's max_concurrency
    buffered: int  # claimed subtasks waiting for a worker and its slots
    ready: int  # of those, the ones whose run limit has a free slot (takeable now)
    in_flight: int  # provider calls in flight
    waiting_on: tuple[str, ...]  # limits holding back buffered work, by name
    idle_since: float | None  # wall time since when ready work found no call in flight
    last_error: EvalError | None  # the latest failed call's error
    last_error_at: float | None
    consecutive_failures: int  # failed calls in a row since the last success
    buffered_by_run: tuple[tuple[str, int], ...] = ()
    in_flight_by_run: tuple[tuple[str, int], ...] = ()
    runs: tuple[str, ...] = ()  # runs with work in this lane (buffered, in flight, ready)

    def stalled(self, now: float, after_s: float) -> bool:
        return self.idle_since is not None and now - self.idle_since >= after_s


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
        # Only a provider that answers from the record's gold data is sent it.
        self.needs_reference = provider.wants_reference
        self.limit = limit
        self.workers = workers
        self.runs: dict[str, LaneRun] = {}
        self._claim_order: deque[str] = deque()  # rotated by every claiming round
        self.buffers: dict[str, deque[ClaimedSubtask]] = {}
        self._take_order: deque[str] = deque()
        self.buffered = 0
        self.closed = False
        self._items_changed = anyio.Event()
        self.feeder_wake = anyio.Event()
        # Observability: calls in flight, workers waiting on a limit, recent failures.
        self.in_flight = 0
        self.in_flight_by_run: Counter[str] = Counter()
        self.waiting: Counter[str] = Counter()  # limit name -> workers waiting on it
        self.blocked_by_run_limit = False  # the last take found only run-limited work
        self.idle_since: float | None = None
        self.last_error: EvalError | None = None
        self.last_error_at: float | None = None
        self.consecutive_failures = 0

    # -- work registry (feeder side) ---------------------------------------------------

    @property
    def low_water(self) -> int:
        """Refill below this many buffered subtasks: the lane's workers, or this
        replica's share of a global model limit when smaller (work buffered beyond the
        share would wait here at a run's end while other replicas idle)."""
        share = self.limit.ceiling
        return self.workers if share is None else max(1, min(self.workers, share))

    @property
    def high_water(self) -> int:
        return 2 * self.low_water  # claim up to this many

    def add_work(self, run_id: str, due: float | None = None) -> None:
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = LaneRun(next_retry_at=due)
            self._claim_order.append(run_id)
        elif due is None:
            run.next_retry_at = None
        elif run.next_retry_at is not None:
            run.next_retry_at = min(run.next_retry_at, due)
        run.version += 1
        self.wake_feeder()

    def forget(self, run_id: str) -> None:
        self.runs.pop(run_id, None)
        if run_id in self._claim_order:
            self._claim_order.remove(run_id)

    def claim_round(self, now: float) -> list[str]:
        """The runs to claim from in this round, in order (those whose retries are not
        waiting); the next round starts with the next run, so no run always goes first."""
        ready = [run_id for run_id in self._claim_order if self.runs[run_id].runnable(now)]
        if ready:
            self._claim_order.rotate(-1)
        return ready

    def may_start(self, limiter: Limiter, run_id: str) -> bool:
        """Whether this process may start a call of the run on this model: its shares
        of the model's and the run's limits (shared with other replicas) are not none."""
        run_limit = limiter.run(run_id)
        return self.limit.allowed > 0 and (run_limit is None or run_limit.allowed > 0)

    def next_retry_due(self, now: float) -> float | None:
        """The earliest retry due after ``now`` among the runs not claimable at ``now``
        (a run claimable at ``now`` was claimed in the round that used it)."""
        dues = [r.next_retry_at for r in self.runs.values() if r.next_retry_at is not None]
        return min((due for due in dues if due > now), default=None)

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
        """Remove and return a run's buffered subtasks (the feeder may refill)."""
        buffer = self.buffers.pop(run_id, None)
        if buffer is None:
            return []
        self.buffered -= len(buffer)
        self.wake_feeder()
        return list(buffer)

    def takeable(self, limiter: Limiter) -> int:
        """Buffered subtasks of runs whose own limit has a free slot (or that have none):
        what the workers can start now, and what the water marks count."""
        if self.limit.allowed == 0:
            return 0  # this replica's share of the model's limit is none
        count = 0
        for run_id, buffer in self.buffers.items():
            run_limit = limiter.run(run_id)
            if run_limit is None or run_limit.in_use < run_limit.allowed:
                count += len(buffer)
        return count

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
        blocked = False
        for _ in range(len(self._take_order)):
            run_id = self._take_order.popleft()
            buffer = self.buffers.get(run_id)
            if not buffer:
                self.buffers.pop(run_id, None)
                continue  # drained or dropped: leaves the rotation
            run_limit = limiter.run(run_id)
            if run_limit is not None and not run_limit.try_acquire():
                self._take_order.append(run_id)
                blocked = True
                continue
            item = buffer.popleft()
            self.buffered -= 1
            if buffer:
                self._take_order.append(run_id)
            else:
                del self.buffers[run_id]
            if self.buffered < self.low_water:
                self.wake_feeder()
            self.blocked_by_run_limit = False
            return item, run_limit
        if blocked and not self.blocked_by_run_limit:
            # Everything buffered waits for run slots: other runs' work may be claimable.
            self.wake_feeder()
        self.blocked_by_run_limit = blocked
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

    # -- observability -----------------------------------------------------------------

    def call_started(self, run_id: str) -> None:
        self.in_flight += 1
        self.in_flight_by_run[run_id] += 1

    def call_ended(self, run_id: str, outcome: SubtaskOutcome | None, now: float) -> None:
        self.in_flight -= 1
        self.in_flight_by_run[run_id] -= 1
        if self.in_flight_by_run[run_id] <= 0:
            del self.in_flight_by_run[run_id]
        if outcome is None or not outcome.attempted:
            return
        if outcome.kind is OutcomeKind.SUCCEEDED:
            self.consecutive_failures = 0
        elif outcome.kind in (OutcomeKind.RETRY, OutcomeKind.FAILED_PERMANENT):
            self.consecutive_failures += 1
            self.last_error = outcome.error
            self.last_error_at = now

    def has_ready_work(self, now: float, limiter: Limiter) -> bool:
        """Work a worker could start now: buffered work whose run limit has a free slot
        (work waiting for its own run's slots, held by that run's calls elsewhere, is
        progressing), or a run whose claims are due."""
        if self.takeable(limiter) > 0:
            return True
        return any(
            r.runnable(now) and run_id not in self.buffers and self.may_start(limiter, run_id)
            for run_id, r in self.runs.items()
        )

    def observe(self, now: float, limiter: Limiter) -> None:
        """Track since when ready work has found no call in flight (sampled)."""
        if self.in_flight == 0 and not self.closed and self.has_ready_work(now, limiter):
            if self.idle_since is None:
                self.idle_since = now
        else:
            self.idle_since = None

    def state(self, limiter: Limiter) -> LaneState:
        waiting = [name for name, count in sorted(self.waiting.items()) if count > 0]
        if self.buffered > self.takeable(limiter):
            waiting.append(RUN_LIMIT_NAME)
        return LaneState(
            model_id=self.model_id,
            capacity=self.limit.capacity,
            buffered=self.buffered,
            ready=self.takeable(limiter),
            in_flight=self.in_flight,
            waiting_on=tuple(sorted(set(waiting))),
            idle_since=self.idle_since,
            last_error=self.last_error,
            last_error_at=self.last_error_at,
            consecutive_failures=self.consecutive_failures,
            buffered_by_run=tuple((r, len(b)) for r, b in self.buffers.items() if b),
            in_flight_by_run=tuple(self.in_flight_by_run.items()),
            runs=tuple(sorted({*self.runs, *self.buffers, *self.in_flight_by_run})),
        )
