"""Conformance: a code sample's run in the sandbox is stored beside its answer, read
back with the task's outputs and its subtask row, and a task's answers without a stored
run are found apart (what a resumed code task runs again)."""

import json
import time

import pytest

from evald_server.domain import OutcomeKind
from evald_server.store import ExecutionRow, Store
from tests.store._helpers import add_dataset, add_run
from tests.store.test_runs import outcome

pytestmark = pytest.mark.anyio


async def test_executions_are_stored_beside_their_answers_and_unexecuted_ones_found(
    store: Store,
) -> None:
    ds = await add_dataset(store, records=4)
    run = await add_run(store, [ds])
    claimed = (await store.claim_ready(run.run_id, "m1", 4, time.time())).subtasks
    await store.record_outcomes(
        [outcome(c, OutcomeKind.SUCCEEDED, output=f"a{c.record_idx}") for c in claimed],
        time.time(),
    )
    (task,) = await store.get_tasks(run.run_id)
    outputs = await store.task_outputs(task.task_id, 0, 10)
    assert [o.execution for o in outputs] == [None] * 4
    assert len(await store.task_outputs(task.task_id, 0, 10, unexecuted=True)) == 4

    ran = {"verdict": "passed", "reason": "every test passed", "tests": []}
    await store.store_executions([ExecutionRow(o.row_id, json.dumps(ran)) for o in outputs[:3]])
    left = await store.task_outputs(task.task_id, 0, 10, unexecuted=True)
    assert [o.row_id for o in left] == [outputs[3].row_id]
    assert await store.task_outputs(task.task_id, outputs[3].row_id, 10, unexecuted=True) == []
    read = await store.task_outputs(task.task_id, 0, 10)
    assert [None if o.execution is None else json.loads(o.execution) for o in read] == [
        ran,
        ran,
        ran,
        None,
    ]
    rows = await store.run_subtasks(run.run_id, None, (), 0, 10)
    assert [r.execution for r in rows] == [ran, ran, ran, None]
