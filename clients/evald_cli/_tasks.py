"""Task selectors: ``--task`` takes a task id or ``MODEL/DATASET[@VERSION]``.

Task ids (``run_…-t3``) are long and appear in few places; a model and a dataset name
are what a person reads in the tables, so either form selects a task of the run.
"""

from collections.abc import Iterable

from evald_cli._errors import CliError
from evald_client import Run, TaskProgress


def task_label(task: TaskProgress) -> str:
    """How tables name a task; also a selector ``--task`` accepts."""
    return f"{task.model_id}/{task.dataset.name}@{task.dataset.version}"


def _matches(task: TaskProgress, selector: str) -> bool:
    if selector == task.task_id:
        return True
    model, slash, dataset = selector.partition("/")
    if not slash:
        return False
    name, at, version = dataset.partition("@")
    return (
        model == task.model_id
        and name == task.dataset.name
        and (not at or version == task.dataset.version)
    )


def resolve_tasks(run: Run, selectors: Iterable[str]) -> list[str]:
    """The task ids the selectors name, in the order given; a selector that names no
    task, or several, is a ``CliError`` that lists the run's tasks."""
    tasks = run.progress.tasks
    resolved = []
    for selector in selectors:
        found = [t for t in tasks if _matches(t, selector)]
        if len(found) != 1:
            problem = "matches no task" if not found else "matches several tasks"
            listing = ", ".join(f"{task_label(t)} ({t.task_id})" for t in tasks)
            raise CliError(
                f"--task {selector!r} {problem} of run {run.run_id}; its tasks: {listing}"
            )
        resolved.append(found[0].task_id)
    return resolved
