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
        self.batches = 0
        self.committed = 0

    async def submit(self, outcome: SubtaskOutcome) -> None:
        await self._send.send(outcome)

    async def close(self) -> None:
        """No more outcomes: ``run`` writes what is buffered and returns."""
        await self._send.aclose()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        async with self._receive:
            closed = False
            while not closed:
                try:
                    first = await self._receive.receive()
                except anyio.EndOfStream:
                    return
                batch = [first]
                deadline = time.monotonic() + self._max_delay_s
                while len(batch) < self._max_batch:
                    try:
                        batch.append(self._receive.receive_nowait())
                        continue
                    except anyio.WouldBlock:
                        pass
                    except anyio.EndOfStream:
                        closed = True
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    with anyio.move_on_after(remaining):
                        try:
                            batch.append(await self._receive.receive())
                        except anyio.EndOfStream:
                            closed = True
                            break
                with anyio.CancelScope(shield=True):
                    await self._flush(batch)

    async def _flush(self, batch: list[SubtaskOutcome]) -> None:
        report = await self._store.complete(batch, time.time())
        self.batches += 1
        self.committed += report.applied
        await self._on_committed(batch, report)
