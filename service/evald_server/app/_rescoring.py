"""RescoreRun: a finished run's stored answers scored again, as a new run, without a
provider call.

The new run's spec is the source's with the scoring settings replaced
(``RescoreSettings``), plus ``rescore_of``, which its results' provenance carries. The
store copies the source's terminal answers, and the judge subtasks that graded them
(their verdicts), into the new run in one transaction (``Store.create_rescore_run``):
the source's judge is kept and its verdicts read again, never asked again; its tasks start in
``scoring`` and are scored by the current scorers like any finished task — after a
restart too. A new setting is a field of ``RescoreSettings`` applied in
``rescored_spec`` (code tasks will add their sandbox limits there).
"""

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evald_server.domain import ChoiceScoring, ErrorReason, FieldViolation, InvalidArgument
from evald_server.engine import (
    DatasetRef,
    ReducerSpec,
    RunBudget,
    RunSpec,
    task_type_problems,
)
from evald_server.store import DatasetRow, RescoreTask, TaskRow


@dataclass(frozen=True, slots=True)
class RescoreSettings:
    """What a rescore changes; None keeps the source run's setting."""

    reducers: tuple[ReducerSpec, ...] | None = None
    choice_scoring: ChoiceScoring | None = None  # every dataset of the run


def _settings_path(field: str) -> str:
    """A RunSpec field as RescoreRunRequest names it."""
    return f"settings.{field}"


def rescored_spec(
    source: RunSpec, source_run_id: str, settings: RescoreSettings, *, name: str
) -> RunSpec:
    """The spec of the run that scores ``source``'s answers again under ``settings``;
    a bad setting is named by its path in the request (RUN_SPEC_INVALID)."""
    options = source.dataset_options
    if settings.choice_scoring is not None:
        options = tuple(dataclasses.replace(o, choice_scoring=None) for o in options)
    try:
        return dataclasses.replace(
            source,
            name=name or f"rescore of {source.name or source_run_id}",
            reducers=source.reducers if settings.reducers is None else settings.reducers,
            choice_scoring=settings.choice_scoring or source.choice_scoring,
            dataset_options=options,
            response_cache=False,
            budget=RunBudget(),
            rescore_of=source_run_id,
        )
    except InvalidArgument as error:
        error.with_field_paths(_settings_path)
        raise


def check_rescore(spec: RunSpec, source: RunSpec, datasets: Mapping[str, DatasetRow]) -> None:
    """What the rescored run asks of its datasets and of the stored answers: each
    reducer applies to each dataset's task type; log-probability reading needs answers
    the source stored log-probabilities with (it read them too)."""
    rows = list(datasets.values())
    problems = [
        (_settings_path(field), what)
        for field, what in task_type_problems(
            spec.reducers, [(f"{d.name} {d.benchmark_version}", d.task_type) for d in rows]
        )
    ]
    for row in rows:
        ref = DatasetRef(row.name, row.benchmark_version)
        if (
            spec.choice_scoring_for(ref) is ChoiceScoring.LOGPROBS
            and source.choice_scoring_for(ref) is not ChoiceScoring.LOGPROBS
        ):
            problems.append(
                (
                    "settings.choice_scoring",
                    f"LOGPROBS needs the answers' log-probabilities; the source run read the "
                    f"text of {row.name} {row.benchmark_version} and stored none",
                )
            )
    if problems:
        raise InvalidArgument(
            ErrorReason.RUN_SPEC_INVALID,
            "invalid rescore: " + "; ".join(f"{f}: {w}" for f, w in problems),
            field_violations=tuple(FieldViolation(f, w) for f, w in problems),
        )


def rescore_tasks(
    run_id: str,
    spec: RunSpec,
    source_tasks: Sequence[TaskRow],
    datasets: Mapping[str, DatasetRow],
) -> list[RescoreTask]:
    """One new task per source task, over a copy of its answers (and its judge's
    verdicts: the models as the source froze them, judge included); log-probabilities
    kept only where they are read."""
    tasks = []
    for task in source_tasks:
        dataset = datasets[task.dataset_id]
        ref = DatasetRef(dataset.name, dataset.benchmark_version)
        tasks.append(
            RescoreTask(
                task_id=f"{run_id}-t{task.ordinal}",
                ordinal=task.ordinal,
                model_id=task.model_id,
                model=task.model,
                dataset_id=task.dataset_id,
                source_task_id=task.task_id,
                keep_logprobs=spec.choice_scoring_for(ref) is ChoiceScoring.LOGPROBS,
            )
        )
    return tasks
