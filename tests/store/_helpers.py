"""Builders for store tests: a dataset and a run written straight through the port."""

import time
from collections.abc import Awaitable, Callable

from evald_server.domain import TaskType
from evald_server.store import DatasetRow, NewRun, NewTask, RecordRow, RunRow, Store

Reopen = Callable[[Store], Awaitable[Store]]  # the ``reopen`` fixture: a restart


async def add_dataset(store: Store, name: str = "ds", records: int = 10) -> DatasetRow:
    row = DatasetRow(
        dataset_id=f"ds_{name}",
        tenant="t1",
        name=name,
        benchmark_version="1.0.0",
        task_type=TaskType.CLASSIFICATION,
        content_sha256="0" * 64,
        record_count=records,
        prompt_template=None,
        created_at=time.time(),
    )
    rows = (RecordRow(idx=i, record_id=f"r{i}", fields={"text": f"x{i}"}) for i in range(records))
    created, _ = await store.create_dataset(row, rows)
    return created


async def add_run(
    store: Store,
    datasets: list[DatasetRow],
    models: tuple[str, ...] = ("m1",),
    *,
    run_id: str = "run_1",
    repeat: int = 1,
    request_id: str | None = None,
    request_hash: str | None = None,
    max_live_runs: int | None = None,
    judge: tuple[str, int] | None = None,  # (judge model, rounds) of every task
) -> RunRow:
    tasks = [
        NewTask(
            task_id=f"{run_id}_t{i}",
            ordinal=i,
            model_id=model,
            model={"model_id": model},
            dataset_id=dataset.dataset_id,
            record_count=dataset.record_count,
            judge_model_id=None if judge is None else judge[0],
            judge_rounds=0 if judge is None else judge[1],
        )
        for i, (model, dataset) in enumerate((m, d) for m in models for d in datasets)
    ]
    run = NewRun(
        run_id=run_id,
        tenant="t1",
        name="test run",
        spec={"models": list(models)},
        repeat=repeat,
        created_at=time.time(),
        request_id=request_id,
        request_hash=request_hash,
    )
    row, _ = await store.create_run(run, tasks, max_live_runs=max_live_runs)
    return row
