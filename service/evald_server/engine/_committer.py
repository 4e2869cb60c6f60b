"""Group commit: outcomes are batched into one store transaction each.

Workers hand outcomes over (waiting only when the bounded buffer is full) and move on;
the committer writes a batch when it reaches ``max_batch`` outcomes or when its oldest
outcome has waited ``max_delay_s``, whichever comes first. An outcome counts as done —
progress, events, task completion — only in ``on_committed``, after its transaction
has committed.

One bad outcome never takes the batch (or the server) with it: a batch the store
cannot keep (``UnstorableOutcome``: a number out of range, text it cannot encode) is
written again in halves, down to the outcome that fails alone, which is replaced by a
permanent failure of its subtask naming what could not be stored. Every other outcome
of the batch is stored, in order. Only a failure the store itself cannot record stops
the committer (and the server), as a lost or full store does.
"""

import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

import anyio
import anyio.abc

from evald_server.domain import ErrorReason, EvalError, OutcomeKind
from evald_server.store import CompletionReport, Store, SubtaskOutcome, UnstorableOutcome

_log = logging.getLogger(__name__)

OnCommitted = Callable[[Sequence[SubtaskOutcome], CompletionReport], Awaitable[None]]


class Committer:
    """Batches outcomes into store transactions. The buffer is bounded: ``submit`` waits
    while ``4 × max_batch`` outcomes are waiting to be written."""

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
        self._bound = 4 * max_batch
        self._buffer: deque[SubtaskOutcome] = deque()
        self._arrived = anyio.Event()  # the buffer went from empty to not empty
        self._full = anyio.Event()  # a whole batch is waiting
        self._space = anyio.Event()  # the buffer dropped below its bound
        self._closed = False
        self.batches = 0
        self.committed = 0

    async def submit(self, outcome: SubtaskOutcome) -> None:
        # A plain deque: no checkpoint on the way in, which is every model call's path.
        while len(self._buffer) >= self._bound:
            await self._space.wait()
        if self._closed:
            raise RuntimeError("the committer is closed")
        self._buffer.append(outcome)
        if len(self._buffer) == 1:
            self._arrived.set()
        elif len(self._buffer) >= self._max_batch:
            self._full.set()

    async def close(self) -> None:
        """No more outcomes: ``run`` writes what is buffered and returns."""
        self._closed = True
        self._arrived.set()
        self._full.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        while True:
            if not self._buffer:
                if self._closed:
                    return
                self._arrived = anyio.Event()
                await self._arrived.wait()
                continue
            # Let the batch fill for up to max_delay_s (one timer per batch, not per
            # outcome); a full batch, or closing, cuts the wait short.
            if len(self._buffer) < self._max_batch and not self._closed:
                self._full = anyio.Event()
                with anyio.move_on_after(self._max_delay_s):
                    await self._full.wait()
            count = min(len(self._buffer), self._max_batch)
            batch = [self._buffer.popleft() for _ in range(count)]
            self._space.set()  # wakes every waiting submitter; later ones wait anew
            self._space = anyio.Event()
            with anyio.CancelScope(shield=True):
                await self._flush(batch)

    async def _flush(self, batch: list[SubtaskOutcome]) -> None:
        """Commit ``batch``, or its parts around the outcome the store cannot keep."""
        try:
            report = await self._store.record_outcomes(batch, time.time())
        except UnstorableOutcome as exc:
            if len(batch) > 1:
                half = len(batch) // 2  # a bad outcome is in one half: the other commits
                await self._flush(batch[:half])
                await self._flush(batch[half:])
                return
            # This one alone. Its failure keeps nothing of it; should even that be
            # refused, the store is at fault, not the row: UnstorableOutcome stops us.
            batch = [_unstorable(batch[0], exc)]
            report = await self._store.record_outcomes(batch, time.time())
        self.batches += 1
        self.committed += report.applied
        await self._on_committed(batch, report)


def _unstorable(outcome: SubtaskOutcome, exc: UnstorableOutcome) -> SubtaskOutcome:
    """The outcome the store refused, as a permanent failure of its subtask that keeps
    nothing of it but its identity and says what could not be stored."""
    _log.error(
        "the outcome of subtask row %d (task %s) cannot be stored (%s); the subtask fails",
        outcome.row_id,
        outcome.task_id,
        exc.detail,
    )
    error = EvalError.of(
        ErrorReason.INTERNAL_ERROR,
        f"the outcome of this call could not be stored ({exc.detail}); "
        "the rest of its batch was stored",
    )
    return SubtaskOutcome(
        row_id=outcome.row_id,
        run_id=outcome.run_id,
        task_id=outcome.task_id,
        model_id=outcome.model_id,
        record_idx=outcome.record_idx,
        repeat_index=outcome.repeat_index,
        kind=OutcomeKind.FAILED_PERMANENT,
        attempted=outcome.attempted,
        error=error,
        phase=outcome.phase,
        judge_round=outcome.judge_round,
    )
