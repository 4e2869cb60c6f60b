"""CompareRuns: load two finished runs of a tenant, match their tasks, pair and compare
each matched task's samples (``evald_server.comparison``) off the event loop.

The samples of one matched task pair are read page by page but held in memory for the
comparison (both runs' succeeded samples of that one task pair, not the whole run).
"""

import functools
from collections.abc import Sequence

import anyio

from evald_server.comparison import (
    CONFIDENCE,
    DEFAULT_PERMUTATIONS,
    DEFAULT_RESAMPLES,
    ModelPair,
    RunComparison,
    TaskComparison,
    TaskRef,
    UnmatchedTask,
    compare_samples,
    match_tasks,
    pair_models,
)
from evald_server.domain import (
    ErrorReason,
    FailedPrecondition,
    NotFound,
    SubtaskState,
    field_error,
)
from evald_server.engine import RunSpec
from evald_server.scoring import ScoringSample
from evald_server.store import RunRow, Store, TaskRow

MAX_RESAMPLES = 10_000
MAX_PERMUTATIONS = 100_000
_PAGE = 2000


def _bounded(value: int, default: int, maximum: int, field: str) -> int:
    if value == 0:
        return default
    if not 1 <= value <= maximum:
        raise field_error(
            field,
            f"must be between 1 and {maximum}",
            f"{field} must be between 1 and {maximum} (0 for {default}), got {value}",
        )
    return value


def _ref(task: TaskRow) -> TaskRef:
    return TaskRef(task.task_id, task.model_id, task.dataset_name, task.dataset_version)


def _unmatched(run_id: str, task: TaskRef) -> UnmatchedTask:
    return UnmatchedTask(
        run_id, task.task_id, task.model_id, task.dataset_name, task.benchmark_version
    )


class ComparisonService:
    def __init__(self, store: Store) -> None:
        self._store = store

    async def _finished(self, tenant: str, run_id: str, field: str) -> RunRow:
        if not run_id:
            raise field_error(
                field,
                "must be set",
                f"{field} is required",
            )
        run = await self._store.get_run(run_id)
        if run is None or run.tenant != tenant:
            raise NotFound(
                ErrorReason.RUN_NOT_FOUND, f"run {run_id!r} not found", metadata={"runId": run_id}
            )
        if not run.state.is_terminal:
            raise FailedPrecondition(
                ErrorReason.RUN_NOT_FINISHED,
                f"run {run_id} is {run.state.value}; only finished runs can be compared",
                metadata={"runId": run_id, "state": run.state.value},
            )
        return run

    async def _samples(self, run_id: str, task_id: str) -> list[ScoringSample]:
        samples: list[ScoringSample] = []
        after = 0
        while True:
            rows = await self._store.run_subtasks(
                run_id, task_id, (SubtaskState.SUCCEEDED,), after, _PAGE
            )
            samples.extend(
                # A code sample's stored run is its verdict: the scorer reads it.
                ScoringSample(
                    r.subtask_id,
                    r.record_id,
                    r.repeat_index,
                    r.fields,
                    r.output,
                    execution=r.execution,
                )
                for r in rows
            )
            if len(rows) < _PAGE:
                return samples
            after = rows[-1].row_id

    async def compare(
        self,
        tenant: str,
        baseline_run_id: str,
        candidate_run_id: str,
        *,
        model_pairs: Sequence[ModelPair] = (),
        resamples: int = 0,
        permutations: int = 0,
        seed: int = 0,
    ) -> RunComparison:
        resamples = _bounded(resamples, DEFAULT_RESAMPLES, MAX_RESAMPLES, "resamples")
        permutations = _bounded(
            permutations, DEFAULT_PERMUTATIONS, MAX_PERMUTATIONS, "permutations"
        )
        baseline = await self._finished(tenant, baseline_run_id, "baseline_run_id")
        candidate = await self._finished(tenant, candidate_run_id, "candidate_run_id")
        rule, models = pair_models(
            RunSpec.from_json(baseline.spec).models,
            RunSpec.from_json(candidate.spec).models,
            model_pairs,
        )
        base_tasks = {t.task_id: t for t in await self._store.get_tasks(baseline.run_id)}
        cand_tasks = await self._store.get_tasks(candidate.run_id)
        matched, base_only, cand_only = match_tasks(
            [_ref(t) for t in base_tasks.values()], [_ref(t) for t in cand_tasks], models
        )
        tasks = []
        for base_ref, cand_ref in matched:
            base_samples = await self._samples(baseline.run_id, base_ref.task_id)
            cand_samples = await self._samples(candidate.run_id, cand_ref.task_id)
            task_type = base_tasks[base_ref.task_id].task_type
            pairing, metrics = await anyio.to_thread.run_sync(
                functools.partial(
                    compare_samples,
                    task_type,
                    base_samples,
                    cand_samples,
                    seed=seed,
                    resamples=resamples,
                    permutations=permutations,
                )
            )
            tasks.append(
                TaskComparison(
                    baseline_task_id=base_ref.task_id,
                    candidate_task_id=cand_ref.task_id,
                    baseline_model_id=base_ref.model_id,
                    candidate_model_id=cand_ref.model_id,
                    dataset_name=base_ref.dataset_name,
                    benchmark_version=base_ref.benchmark_version,
                    task_type=task_type,
                    pairing=pairing,
                    metrics=metrics,
                )
            )
        return RunComparison(
            baseline_run_id=baseline.run_id,
            candidate_run_id=candidate.run_id,
            task_pairing=rule,
            tasks=tuple(tasks),
            unmatched_tasks=tuple(
                [_unmatched(baseline.run_id, t) for t in base_only]
                + [_unmatched(candidate.run_id, t) for t in cand_only]
            ),
            confidence_level=CONFIDENCE,
            resamples=resamples,
            permutations=permutations,
            seed=seed,
        )
