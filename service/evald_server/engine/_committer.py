"""Group commit: outcomes are batched into one store transaction each.

Workers hand outcomes over (waiting only when the bounded buffer is full) and move on;
the committer writes a batch when it reaches ``max_batch`` outcomes or when its oldest
outcome has waited ``max_delay_s``, whichever comes first. An outcome counts as done —
progress, events, task completion — only in ``on_committed``, after its transaction
has committed.
"""

import time
from collections.abc import Awaitable, Callable, Sequence

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from evald_server.store import CompletionReport, Store, SubtaskOutcome

OnCommitted = Callable[[Sequence[SubtaskOutcome], CompletionReport], Awaitable[None]]


class Committer:
    def __init__(
        self,
        store: Store,
        on_committed: OnCommitted,
        *,
        max_batch: int = 256,
        max_delay_s: float = 0.02,
    ) -> None:
        self._store = store
        self._on_committed = on_committed
        self._max_batch = max_batch
        self._max_delay_s = max_delay_s
        send, receive = anyio.create_memory_object_stream[SubtaskOutcome](4 * max_batch)
        self._send: MemoryObjectSendStream[SubtaskOutcome] = send
        self._receive: MemoryObjectReceiveStream[SubtaskOutcome] = receive
        self._full = anyio.Event()
        self.batches = 0
        self.committed = 0

    async def submit(self, outcome: SubtaskOutcome) -> None:
        await self._send.send(outcome)
        if self._send.statistics().current_buffer_used >= self._max_batch:
            self._full.set()

    async def close(self) -> None:
        """No more outcomes: ``run`` writes what is buffered and returns."""
        await self._send.aclose()
        self._full.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        async with self._receive:
            while True:
                try:
                    first = await self._receive.receive()
                except anyio.EndOfStream:
                    return
                # Let the batch fill for up to max_delay_s (one timer per batch, not
                # per outcome); a full batch, or closing, cuts the wait short.
                if self._receive.statistics().current_buffer_used + 1 < self._max_batch:
                    self._full = anyio.Event()
                    with anyio.move_on_after(self._max_delay_s):
                        await self._full.wait()
                batch = [first]
                while len(batch) < self._max_batch:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except (anyio.WouldBlock, anyio.EndOfStream):
                        break
                with anyio.CancelScope(shield=True):
                    await self._flush(batch)

    async def _flush(self, batch: list[SubtaskOutcome]) -> None:
        report = await self._store.complete(batch, time.time())
        self.batches += 1
        self.committed += report.applied
        await self._on_committed(batch, report)
