"""Run event subscriptions: replay from the store, then follow live.

The store is the log (seqs are assigned in the transaction that appends an event); the
hub only remembers, per run with subscribers, the last published seq and a small ring
of recent events, and wakes waiting subscribers. A subscriber *pulls*: it reads the
ring when the ring covers its cursor and the store otherwise, at its own pace, so a
slow subscriber holds no queue at all and can never slow the engine. Its cursor makes
delivery gap-free and duplicate-free whatever order events are published in.

The ring's invariant: it holds a contiguous run of seqs ending at the channel's
``last_seq``, and ``last_seq`` moves only when events are *published*. A subscriber
that reads the store may see events committed but not yet published (the engine
publishes after its commit returns); those never move ``last_seq`` ahead of the ring,
or another subscriber would take the ring's silence for "nothing new" and skip them.
A subscriber idle for a heartbeat reads the store again, so an event whose publish
never came is still delivered.
"""

import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass, field

import anyio

from evald_server.domain import (
    ErrorReason,
    EventKind,
    InvalidArgument,
    NotFound,
    OutOfRange,
    RunState,
    RunStateChanged,
    SampleFailure,
    from_jsonable,
)
from evald_server.engine._progress import RunProgress
from evald_server.engine._results import TaskEvaluation
from evald_server.store import EventRow, Json, Store

_PAGE = 256

EventBody = RunStateChanged | RunProgress | TaskEvaluation | SampleFailure

_DECODE: Mapping[EventKind, Callable[[Json], EventBody]] = {
    EventKind.RUN_STATE: lambda payload: from_jsonable(RunStateChanged, payload),
    EventKind.PROGRESS: RunProgress.from_json,
    EventKind.TASK_SCORED: TaskEvaluation.from_json,
    EventKind.SAMPLE_FAILED: lambda payload: from_jsonable(SampleFailure, payload),
}


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One entry of a run's event log: its typed payload, or none for a heartbeat (not
    stored), which carries only the seq of the last event sent."""

    run_id: str
    seq: int
    time: float
    kind: EventKind
    body: EventBody | None = None

    @property
    def run_state(self) -> RunState | None:
        return self.body.state if isinstance(self.body, RunStateChanged) else None

    @property
    def progress(self) -> RunProgress | None:
        return self.body if isinstance(self.body, RunProgress) else None

    @property
    def evaluation(self) -> TaskEvaluation | None:
        return self.body if isinstance(self.body, TaskEvaluation) else None

    @property
    def sample_failure(self) -> SampleFailure | None:
        return self.body if isinstance(self.body, SampleFailure) else None

    @property
    def is_terminal(self) -> bool:
        return self.run_state is not None and self.run_state.is_terminal

    @classmethod
    def from_row(cls, row: EventRow) -> "RunEvent":
        decode = _DECODE.get(row.kind)  # heartbeats carry nothing (and are never stored)
        body = None if decode is None else decode(row.payload)
        return cls(run_id=row.run_id, seq=row.seq, time=row.time, kind=row.kind, body=body)

    @classmethod
    def heartbeat(cls, run_id: str, seq: int, time: float) -> "RunEvent":
        return cls(run_id=run_id, seq=seq, time=time, kind=EventKind.HEARTBEAT)


@dataclass(slots=True)
class _Channel:
    last_seq: int
    subscribers: int = 0
    ring: deque[EventRow] = field(default_factory=deque)
    changed: anyio.Event = field(default_factory=anyio.Event)

    def since(self, cursor: int) -> list[EventRow] | None:
        """Published events after ``cursor`` from the ring; None when the ring does not
        reach back that far (the store has them)."""
        if cursor >= self.last_seq:
            return []
        if not self.ring or self.ring[0].seq > cursor + 1:
            return None
        return [e for e in self.ring if e.seq > cursor]


class EventHub:
    """Publishes committed events to live subscribers; ``subscribe`` is the watch."""

    def __init__(self, store: Store, *, heartbeat_s: float = 5.0, ring_size: int = 512) -> None:
        self._store = store
        self._heartbeat_s = heartbeat_s
        self._ring_size = ring_size
        self._channels: dict[str, _Channel] = {}

    def publish(self, events: Iterable[EventRow]) -> None:
        """Tell subscribers about events that have committed (never blocks)."""
        woken: set[str] = set()
        for event in events:
            channel = self._channels.get(event.run_id)
            if channel is None:
                continue  # nobody is watching: the store has it
            if event.seq == channel.last_seq + 1:
                channel.ring.append(event)
                if len(channel.ring) > self._ring_size:
                    channel.ring.popleft()
            elif event.seq > channel.last_seq:
                channel.ring.clear()  # out of order: the gap is read from the store
            channel.last_seq = max(channel.last_seq, event.seq)
            woken.add(event.run_id)
        for run_id in woken:
            channel = self._channels[run_id]
            channel.changed.set()
            channel.changed = anyio.Event()

    def poke(self, run_id: str, last_seq: int) -> None:
        """Another process committed the run's events up to ``last_seq`` (a shared
        store's change feed): its watchers here read them from the store."""
        channel = self._channels.get(run_id)
        if channel is None or last_seq <= channel.last_seq:
            return
        channel.ring.clear()  # the ring no longer ends at last_seq: read the store
        channel.last_seq = last_seq
        channel.changed.set()
        channel.changed = anyio.Event()

    def poke_all(self) -> None:
        """Notices may have been missed: every watcher reads the store again."""
        for channel in self._channels.values():
            channel.ring.clear()
            channel.last_seq += 1  # forces a store read; the read moves nothing past it
            channel.changed.set()
            channel.changed = anyio.Event()

    async def subscribe(self, run_id: str, after_seq: int) -> AsyncGenerator[RunEvent, None]:
        """Events with seq > ``after_seq``, then live ones, ending after the terminal one.

        Raises ``OutOfRange`` (WATCH_SEQ_EXPIRED, metadata ``oldestSeq``) when events
        after ``after_seq`` are no longer retained. The caller checks the tenant.
        """
        run = await self._store.get_run(run_id)
        if run is None:
            raise NotFound(ErrorReason.RUN_NOT_FOUND, f"run {run_id!r} not found")
        if after_seq < 0 or after_seq > run.last_seq:
            raise InvalidArgument(
                ErrorReason.INVALID_ARGUMENT,
                f"after_seq must be between 0 and the run's last seq {run.last_seq}",
                metadata={"lastSeq": run.last_seq},
            )
        _check_retained(run_id, after_seq, run.oldest_seq)
        if run.terminal_seq is not None and after_seq >= run.terminal_seq:
            return _nothing()  # the client has seen the end already
        return self._follow(run_id, after_seq, run.last_seq)

    async def _follow(
        self, run_id: str, cursor: int, last_seq: int
    ) -> AsyncGenerator[RunEvent, None]:
        channel = self._channels.get(run_id)
        if channel is None:
            channel = self._channels[run_id] = _Channel(last_seq=last_seq)
        channel.subscribers += 1
        from_store = True  # the first read is the store's: the channel may be new
        try:
            while True:
                waiter = channel.changed  # taken before reading: no wakeup is lost
                events = None if from_store else channel.since(cursor)
                from_store = False
                if events is None:
                    events = await self._store.read_events(run_id, cursor, _PAGE)
                    if events and events[0].seq != cursor + 1:
                        _check_retained(run_id, cursor, events[0].seq)
                for row in events:
                    event = RunEvent.from_row(row)
                    yield event
                    cursor = row.seq
                    if event.is_terminal and await self._is_last(run_id, row.seq):
                        return
                if events:
                    continue
                with anyio.move_on_after(self._heartbeat_s) as idle:
                    await waiter.wait()
                if idle.cancelled_caught:
                    from_store = True  # a safety net: never rely on a publish alone
                    yield RunEvent.heartbeat(run_id, cursor, time.time())
        finally:
            channel.subscribers -= 1
            if channel.subscribers == 0:
                self._channels.pop(run_id, None)

    async def _is_last(self, run_id: str, seq: int) -> bool:
        """A terminal event ends the watch unless the run went on (a retry) after it."""
        run = await self._store.get_run(run_id)
        return run is None or run.terminal_seq == seq or run.last_seq == seq


async def _nothing() -> AsyncGenerator[RunEvent, None]:
    return
    yield  # an async generator that yields nothing


def _check_retained(run_id: str, cursor: int, oldest_seq: int) -> None:
    if cursor < oldest_seq - 1:
        raise OutOfRange(
            ErrorReason.WATCH_SEQ_EXPIRED,
            f"events of run {run_id} after seq {cursor} are no longer retained; "
            f"the oldest retained is {oldest_seq}",
            metadata={"oldestSeq": oldest_seq},
        )
