"""One outcome the database cannot keep is a failure domain of its own, on every backend:
the store refuses its batch whole and stays usable, the committer stores the rest of
the batch and fails that subtask with an error naming what could not be stored, and the
server keeps serving every other run."""

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.config import ModelConfig
from evald_server.domain import ErrorReason, OutcomeKind, RunState, SubtaskState
from evald_server.engine._committer import Committer
from evald_server.providers import Completion, ProviderRequest, SimulatedProvider
from evald_server.store import (
    ClaimedSubtask,
    CompletionReport,
    Store,
    SubtaskOutcome,
    UnstorableOutcome,
)
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished
from tests.store._helpers import add_dataset, add_run
from tests.store.conftest import Stores
from tests.store.test_runs import assert_counters_match_recount, outcome

pytestmark = pytest.mark.anyio

# Values no column can keep: an integer beyond 64 bits, text that is not UTF-8.
UNSTORABLE: dict[str, dict[str, Any]] = {
    "huge_tokens": {"prompt_tokens": 10**30},
    "lone_surrogate": {"output": "yes\ud800"},
}


async def _claimed(store: Store, records: int) -> tuple[str, list[ClaimedSubtask]]:
    ds = await add_dataset(store, records=records)
    run = await add_run(store, [ds])
    claimed = (await store.claim_ready(run.run_id, "m1", records, time.time())).subtasks
    assert len(claimed) == records
    return run.run_id, list(claimed)


def _success(item: ClaimedSubtask, **fields: Any) -> SubtaskOutcome:
    values = {"output": f"answer {item.record_idx}", "completion_tokens": 2, **fields}
    return outcome(item, OutcomeKind.SUCCEEDED, **values)


@pytest.mark.parametrize("bad", sorted(UNSTORABLE))
async def test_a_batch_with_an_unstorable_value_is_refused_whole_and_the_store_stays_usable(
    store: Store, bad: str
) -> None:
    run_id, claimed = await _claimed(store, 3)
    batch = [_success(claimed[0]), _success(claimed[1], **UNSTORABLE[bad]), _success(claimed[2])]
    with pytest.raises(UnstorableOutcome) as refused:
        await store.record_outcomes(batch, time.time())
    assert refused.value.detail  # the driver's reason, cut to a prefix
    rows = await store.task_subtasks(claimed[0].task_id, [], 0, 10)
    assert {r.state for r in rows} == {SubtaskState.RUNNING}, "nothing of the batch is stored"
    report = await store.record_outcomes([batch[0], batch[2]], time.time())
    assert report.applied == 2
    await assert_counters_match_recount(store, run_id)


class _Recorder:
    def __init__(self) -> None:
        self.batches: list[list[SubtaskOutcome]] = []

    async def __call__(self, batch: Sequence[SubtaskOutcome], report: CompletionReport) -> None:
        assert report.applied == len(batch)
        self.batches.append(list(batch))


async def _commit(store: Store, outcomes: list[SubtaskOutcome]) -> _Recorder:
    recorder = _Recorder()
    committer = Committer(store, recorder, max_batch=len(outcomes), max_delay_s=5.0)
    async with anyio.create_task_group() as tg:
        await tg.start(committer.run)
        for item in outcomes:
            await committer.submit(item)  # one batch: it is full
        await committer.close()
    return recorder


async def test_the_committer_stores_the_rest_of_the_batch_and_fails_the_bad_subtasks(
    store: Store,
) -> None:
    run_id, claimed = await _claimed(store, 8)
    outcomes = [_success(item) for item in claimed]
    outcomes[2] = _success(claimed[2], **UNSTORABLE["huge_tokens"])
    outcomes[7] = _success(claimed[7], **UNSTORABLE["lone_surrogate"])
    recorder = await _commit(store, outcomes)
    committed = [o for batch in recorder.batches for o in batch]
    assert [o.row_id for o in committed] == [c.row_id for c in claimed]  # all, in order
    kinds = {o.row_id: o.kind for o in committed}
    bad = {claimed[2].row_id, claimed[7].row_id}
    assert {r for r, k in kinds.items() if k is OutcomeKind.FAILED_PERMANENT} == bad
    rows = {r.row_id: r for r in await store.task_subtasks(claimed[0].task_id, [], 0, 10)}
    for row_id, row in rows.items():
        if row_id in bad:
            assert row.state is SubtaskState.FAILED_PERMANENT
            assert row.output is None
            assert row.prompt_tokens is None
            assert row.last_error is not None
            assert row.last_error.reason is ErrorReason.INTERNAL_ERROR
            assert "could not be stored" in row.last_error.message
        else:
            assert (row.state, row.output) == (SubtaskState.SUCCEEDED, f"answer {row.record_idx}")
    messages = {rows[r].last_error.message for r in bad}  # type: ignore[union-attr]
    assert any("OverflowError" in m or "int64" in m or "int32" in m for m in messages), messages
    assert any("surrogate" in m for m in messages), messages
    await assert_counters_match_recount(store, run_id)


async def test_a_failure_the_store_cannot_keep_either_stops_the_committer(store: Store) -> None:
    _, (item,) = await _claimed(store, 1)
    # Its identity itself cannot be bound: no failure of it can be stored either.
    unbindable = _success(item)
    object.__setattr__(unbindable, "row_id", 10**30)
    with pytest.raises(BaseExceptionGroup) as stopped:  # out of the committer's task group
        await _commit(store, [unbindable])
    assert stopped.value.subgroup(UnstorableOutcome) is not None


class _ForgetfulProvider:
    """A provider adapter that forgot the answer bounds for one record (a bug): its
    answer to record 3 reports 10^30 prompt tokens."""

    wants_reference = True

    def __init__(self, model: ModelConfig) -> None:
        self._inner = SimulatedProvider(model)

    async def complete(self, request: ProviderRequest) -> Completion:
        answer = await self._inner.complete(request)
        if request.request_key.endswith(".3.0"):
            return Completion(answer.text, answer.latency_s, prompt_tokens=10**30)
        return answer

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_the_server_stays_up_and_stores_the_rest_of_the_commit_group(
    stores: Stores, tmp_path: Path
) -> None:
    model = ModelConfig(
        id="m1",
        provider="simulated",
        max_concurrency=8,
        simulator={"accuracy": 1.0, "latency_ms_median": 0.0, "seed": 3},
    )
    # One commit group for the whole run: it waits up to 2 s for 64 outcomes.
    config = make_config(tmp_path, [model], engine={"commit_batch": 64, "commit_delay_s": 2.0})
    store = await stores.open()
    providers = {"m1": _ForgetfulProvider(model)}
    async with Evald.open(config, store=store, providers=providers, scoring=InlineScoring()) as app:
        await upload(app, "ds", 8)
        spec = RunSpec(models=("m1",), datasets=(DatasetRef("ds", "1.0.0"),))
        first = await app.runs.create(TENANT, spec)
        await wait_until_finished(app, first.run_id)
        assert app.engine.committer.batches > 1  # the group went in parts
        second = await app.runs.create(TENANT, spec)  # the server still serves
        await wait_until_finished(app, second.run_id)
        runs = [await app.runs.get(TENANT, r.run_id) for r in (first, second)]
        samples = (await app.runs.samples(TENANT, first.run_id, page_size=100)).items
    assert [r.state for r in runs] == [RunState.PARTIAL, RunState.PARTIAL]
    failed = [s for s in samples if s.state is SubtaskState.FAILED_PERMANENT]
    assert [s.record_id for s in failed] == ["r3"]
    assert failed[0].last_error is not None
    assert "could not be stored" in failed[0].last_error.message
    succeeded = [s for s in samples if s.state is SubtaskState.SUCCEEDED]
    assert len(succeeded) == 7
    assert all(s.prompt_tokens is not None for s in succeeded)
