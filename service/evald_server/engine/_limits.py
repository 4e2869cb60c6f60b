"""The three named, keyed concurrency limits a model call must hold, with statistics.

* ``max_inflight`` (key ``server``): every call of the process;
* ``model.max_concurrency`` (key: model id): shared by every run using the model, which
  is what keeps a provider from rate-limiting us;
* ``run.max_concurrency`` (key: run id): optional, per run.
"""

from collections import deque
from dataclasses import dataclass

import anyio

from evald_server.domain import ErrorReason, FieldViolation, InvalidArgument

SERVER_LIMIT = "max_inflight"
MODEL_LIMIT = "model.max_concurrency"
RUN_LIMIT = "run.max_concurrency"


@dataclass(frozen=True, slots=True)
class LimitStats:
    name: str
    key: str
    capacity: int
    in_use: int
    waiting: int
    # Bounds of an adaptive capacity (both equal to ``capacity`` for a fixed one), and
    # how many rate-limit episodes have lowered it.
    min_capacity: int = 0
    max_capacity: int = 0
    episodes: int = 0


class Limit:
    """One counting limit: FIFO for waiters, a slot handed straight to the next waiter on
    release, and a non-blocking ``try_acquire``. Taking a free slot does not yield: it
    sits on the hot path of every model call."""

    def __init__(self, name: str, key: str, capacity: int) -> None:
        check_limit(name, capacity)
        self.name = name
        self.key = key
        self.capacity = capacity
        self.min_capacity = capacity  # an adaptive limit moves between these two
        self.max_capacity = capacity
        self.episodes = 0
        # This process's share of a limit that several replicas share (None: all of it).
        self.ceiling: int | None = None
        self._allowed = capacity  # min(capacity, ceiling): what may be in use
        self._in_use = 0
        self._waiters: deque[anyio.Event] = deque()

    def set_capacity(self, capacity: int) -> None:
        """Adaptive concurrency moves the capacity: a higher one admits waiters at once,
        a lower one lets calls in flight finish and hands on no slot until below it."""
        self.capacity = capacity
        self._admit()

    def set_ceiling(self, ceiling: int | None) -> None:
        """Cap the capacity at this process's share of a global limit (may be 0: no
        slot until the share grows); like a lower capacity, a lower ceiling lets the
        calls in flight finish and hands on no slot until below it."""
        self.ceiling = ceiling
        self._admit()

    def _admit(self) -> None:
        self._allowed = self.capacity if self.ceiling is None else min(self.capacity, self.ceiling)
        while self._waiters and self._in_use < self._allowed:
            self._in_use += 1
            self._waiters.popleft().set()

    @property
    def allowed(self) -> int:
        """The slots this process may use now: its capacity, capped at its share."""
        return self._allowed

    @property
    def held(self) -> int:
        """The slots this process may be using: what it allows or, after a cut, more."""
        return max(self._allowed, self._in_use)

    def try_acquire(self) -> bool:
        if self._in_use < self._allowed and not self._waiters:
            self._in_use += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        granted = anyio.Event()
        self._waiters.append(granted)
        try:
            await granted.wait()
        except BaseException:
            if granted.is_set():
                self.release()  # the slot was ours already: pass it on
            else:
                self._waiters.remove(granted)
            raise

    def release(self) -> None:
        if self._waiters and self._in_use <= self._allowed:
            self._waiters.popleft().set()  # the slot changes hands; in_use stays
        else:
            self._in_use -= 1

    @property
    def in_use(self) -> int:
        return self._in_use

    def stats(self) -> LimitStats:
        return LimitStats(
            name=self.name,
            key=self.key,
            capacity=self.capacity,
            in_use=self._in_use,
            waiting=len(self._waiters),
            min_capacity=self.min_capacity,
            max_capacity=self.max_capacity,
            episodes=self.episodes,
        )


@dataclass(slots=True)
class RunSlot:
    """A call's slot of its run's limit (``limit`` None: the run has none), taken with
    its subtask: ``held`` while the call has it (a call waiting for its model's rate
    budget gives it back, and takes one again once admitted)."""

    limit: Limit | None
    held: bool = True

    def __post_init__(self) -> None:
        self.held = self.limit is not None

    def give_back(self) -> bool:
        """Release the slot if held; True when one was released."""
        if self.limit is None or not self.held:
            return False
        self.held = False
        self.limit.release()
        return True


def check_limit(name: str, value: int) -> None:
    """Reject a limit below 1 with INVALID_ARGUMENT naming it."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(
            ErrorReason.INVALID_ARGUMENT,
            f"{name} must be an integer of at least 1, got {value!r}",
            metadata={"limit": name},
            field_violations=(FieldViolation(name, "must be at least 1"),),
        )


class Limiter:
    """The server's limits: one server-wide, one per configured model, one per run."""

    def __init__(self, max_inflight: int, model_limits: dict[str, int]) -> None:
        self.server = Limit(SERVER_LIMIT, "server", max_inflight)
        self._models = {m: Limit(MODEL_LIMIT, m, c) for m, c in model_limits.items()}
        self._runs: dict[str, Limit] = {}

    def model(self, model_id: str) -> Limit:
        return self._models[model_id]

    def run(self, run_id: str) -> Limit | None:
        return self._runs.get(run_id)

    def add_run(self, run_id: str, max_concurrency: int | None) -> None:
        if max_concurrency is not None and run_id not in self._runs:
            self._runs[run_id] = Limit(RUN_LIMIT, run_id, max_concurrency)

    def run_limits(self) -> dict[str, Limit]:
        """The limits of the runs that have one, by run id."""
        return dict(self._runs)

    def remove_run(self, run_id: str) -> None:
        """Forget a finished run's limit (its calls have all returned)."""
        self._runs.pop(run_id, None)

    def stats(self) -> list[LimitStats]:
        limits = [self.server, *self._models.values(), *self._runs.values()]
        return [limit.stats() for limit in limits]
