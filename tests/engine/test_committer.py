"""Group commit: batches by size and by time, bounded buffer, everything written on close."""

from collections.abc import Sequence

import anyio
import pytest

from evald_server.domain import OutcomeKind
from evald_server.engine._committer import Committer
from evald_server.store import CompletionReport, SubtaskOutcome


class RecordingStore:
    """Only ``record_outcomes`` is called by the committer; it can be held shut."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = anyio.Event()
        self.gate.set()

    async def record_outcomes(
        self, outcomes: Sequence[SubtaskOutcome], now: float
    ) -> CompletionReport:
        await self.gate.wait()
        self.batches.append([o.row_id for o in outcomes])
        return CompletionReport(len(outcomes), (), (), {}, ())


def outcome(row_id: int) -> SubtaskOutcome:
    return SubtaskOutcome(row_id, "run", "task", "m", row_id, 0, OutcomeKind.SUCCEEDED)


@pytest.mark.anyio
async def test_outcomes_are_batched_in_order_and_reported_after_commit() -> None:
    store = RecordingStore()
    committed: list[int] = []

    async def on_committed(batch: Sequence[SubtaskOutcome], report: CompletionReport) -> None:
        assert [o.row_id for o in batch] == store.batches[-1]  # after its transaction
        committed.extend(o.row_id for o in batch)

    committer = Committer(store, on_committed, max_batch=4, max_delay_s=0.05)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        await tg.start(committer.run)
        for i in range(10):
            await committer.submit(outcome(i))
        await committer.close()
    assert committed == list(range(10))
    assert all(len(batch) <= 4 for batch in store.batches)
    assert len(store.batches) == 3  # 4 + 4 + 2: full batches go at once, the rest on close


@pytest.mark.anyio
async def test_a_slow_store_pushes_back_on_submitters() -> None:
    store = RecordingStore()
    store.gate = anyio.Event()  # the store hangs until we open it

    async def on_committed(batch: Sequence[SubtaskOutcome], report: CompletionReport) -> None:
        pass

    committer = Committer(store, on_committed, max_batch=2, max_delay_s=0.001)  # type: ignore[arg-type]
    submitted = 0

    async def producer() -> None:
        nonlocal submitted
        for i in range(20):
            await committer.submit(outcome(i))
            submitted += 1

    async with anyio.create_task_group() as tg:
        await tg.start(committer.run)
        tg.start_soon(producer)
        await anyio.wait_all_tasks_blocked()
        # One batch is in the (blocked) store, the buffer holds at most 4 × max_batch.
        assert submitted == 2 + 8
        store.gate.set()
        await anyio.wait_all_tasks_blocked()
        await committer.close()
    assert sum(len(b) for b in store.batches) == 20
