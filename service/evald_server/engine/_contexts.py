"""The loaded context of every live task, shared by the engine and the dispatcher.

The engine loads a run's task contexts when the run is registered and drops them when
it ends; the dispatcher reads one on every call (``[task_id]``), and the committer's
callback asks which run a finished task belongs to. One owner, so that loading and
forgetting cannot drift apart (a run's task list and its contexts go together).
"""

from collections.abc import Iterable

from evald_server.engine._executor import TaskContext


class TaskContexts:
    def __init__(self) -> None:
        self._by_task: dict[str, TaskContext] = {}
        self._by_run: dict[str, list[str]] = {}

    def load(self, run_id: str, contexts: Iterable[TaskContext]) -> None:
        """Every task of the run (again, on a retry: the contexts are rebuilt)."""
        task_ids = []
        for ctx in contexts:
            self._by_task[ctx.task_id] = ctx
            task_ids.append(ctx.task_id)
        self._by_run[run_id] = task_ids

    def __getitem__(self, task_id: str) -> TaskContext:
        return self._by_task[task_id]

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._by_task

    def run_of(self, task_id: str) -> str | None:
        ctx = self._by_task.get(task_id)
        return None if ctx is None else ctx.run_id

    def task_ids(self, run_id: str) -> tuple[str, ...]:
        return tuple(self._by_run.get(run_id, ()))

    def forget_run(self, run_id: str) -> None:
        for task_id in self._by_run.pop(run_id, ()):
            self._by_task.pop(task_id, None)
