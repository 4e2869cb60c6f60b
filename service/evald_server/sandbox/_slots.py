"""The sandbox's slots: a named limit on the programs running at once, server-wide.

A slot is a number, not only a count: slot ``i`` runs its programs under host uid
``uid_base + i``, so that RLIMIT_NPROC (which counts per uid) bounds each running
program alone. Waiters are served first come, first served, and a released slot goes
straight to the next waiter; ``stats`` reports capacity, in use and waiting, like the
engine's named limits.
"""

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

SLOTS_LIMIT = "sandbox.slots"


@dataclass(frozen=True, slots=True)
class SlotStats:
    name: str
    key: str
    capacity: int
    in_use: int
    waiting: int


class SandboxSlots:
    """``capacity`` numbered slots; ``hold()`` waits for one and gives it back on exit."""

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"{SLOTS_LIMIT} must be an integer of at least 1, got {capacity!r}")
        self.capacity = capacity
        self._free: deque[int] = deque(range(capacity))
        self._waiters: deque[tuple[anyio.Event, list[int]]] = deque()

    def try_acquire(self) -> int | None:
        """A free slot at once, or None (never while others wait: first come, first served)."""
        if self._free and not self._waiters:
            return self._free.popleft()
        return None

    async def acquire(self) -> int:
        slot = self.try_acquire()
        if slot is not None:
            return slot
        granted = anyio.Event()
        handed: list[int] = []
        waiter = (granted, handed)
        self._waiters.append(waiter)
        try:
            await granted.wait()
        except BaseException:
            if handed:
                self.release(handed[0])  # the slot was ours already: pass it on
            else:
                self._waiters.remove(waiter)
            raise
        return handed[0]

    def release(self, slot: int) -> None:
        if self._waiters:
            granted, handed = self._waiters.popleft()
            handed.append(slot)
            granted.set()
        else:
            self._free.append(slot)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[int]:
        slot = await self.acquire()
        try:
            yield slot
        finally:
            self.release(slot)

    @property
    def in_use(self) -> int:
        return self.capacity - len(self._free)

    def stats(self) -> SlotStats:
        return SlotStats(
            name=SLOTS_LIMIT,
            key="server",
            capacity=self.capacity,
            in_use=self.in_use,
            waiting=len(self._waiters),
        )
