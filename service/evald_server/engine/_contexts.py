"""The loaded context of every live task, shared by the engine and the dispatcher.

``task_contexts`` builds a task's contexts from what CreateRun froze (``TaskModels``)
and the run's spec: one for its answers and, for a judged run, one for its judge phase.
The engine loads a run's task contexts when the run is registered and drops them when
it ends; the dispatcher reads one on every call (``[context_key(task_id, phase)]``: a
judged task's judge phase has a context of its own), and the committer's callback asks
which run a finished task belongs to. One owner, so that loading and forgetting cannot
drift apart (a run's task list and its contexts go together).
"""

from collections.abc import Callable, Iterable, Iterator, Mapping

from evald_server.datasets import ChatPrompt
from evald_server.domain import ChoiceScoring, SubtaskPhase, TaskType
from evald_server.engine._cost import Pricing
from evald_server.engine._executor import TOP_LOGPROBS, TaskContext, context_key
from evald_server.engine._judging import JudgePrompt
from evald_server.engine._spec import DatasetRef, RunSpec
from evald_server.engine._task_models import TaskModels


def task_contexts(
    task_id: str,
    run_id: str,
    models: TaskModels,
    spec: RunSpec,
    dataset: tuple[DatasetRef, TaskType],
    prompt: ChatPrompt,
    cache_scope: Callable[[str], str | None],
) -> list[TaskContext]:
    """A task's call contexts: its answers' and, when it is judged, its judge's
    (``cache_scope(model_id)``: the response cache's scope, None without the cache)."""
    ref, task_type = dataset
    choices = task_type is TaskType.MULTIPLE_CHOICE
    logprobs = choices and spec.choice_scoring_for(ref) is ChoiceScoring.LOGPROBS
    loglikelihood = choices and spec.choice_scoring_for(ref) is ChoiceScoring.LOGLIKELIHOOD
    answer = models.answer
    contexts = [
        TaskContext(
            task_id=task_id,
            run_id=run_id,
            model_id=answer.model_id,
            task_type=task_type,
            prompt=prompt,
            params=answer.params,
            policy=spec.retry_policy,
            top_logprobs=TOP_LOGPROBS if logprobs else None,
            continuation=spec.continuation_for(ref) if loglikelihood else None,
            prompt_format=spec.prompt_format_for(ref, task_type),
            pricing=Pricing.of(answer.price),
            cache_scope=cache_scope(answer.model_id),
        )
    ]
    judge = models.judge
    if spec.judge is not None and judge is not None:
        contexts.append(
            TaskContext(
                task_id=task_id,
                run_id=run_id,
                model_id=judge.model_id,
                task_type=task_type,
                prompt=prompt,
                params=judge.params,
                policy=spec.retry_policy,
                pricing=Pricing.of(judge.price),
                judge=JudgePrompt(spec.judge, task_type, prompt),
                cache_scope=cache_scope(judge.model_id),
            )
        )
    return contexts


class TaskContexts(Mapping[str, TaskContext]):
    def __init__(self) -> None:
        self._by_key: dict[str, TaskContext] = {}
        self._by_run: dict[str, list[str]] = {}

    def load(self, run_id: str, contexts: Iterable[TaskContext]) -> None:
        """Every task of the run (again, on a retry: the contexts are rebuilt)."""
        keys = []
        for ctx in contexts:
            phase = SubtaskPhase.ANSWER if ctx.judge is None else SubtaskPhase.JUDGE
            key = context_key(ctx.task_id, phase)
            self._by_key[key] = ctx
            keys.append(key)
        self._by_run[run_id] = keys

    def __getitem__(self, key: str) -> TaskContext:
        return self._by_key[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def __len__(self) -> int:
        return len(self._by_key)

    def run_of(self, task_id: str) -> str | None:
        ctx = self._by_key.get(task_id)
        return None if ctx is None else ctx.run_id

    def run_models(self, run_id: str) -> list[str] | None:
        """The models a loaded run calls (judges included); None for a run not loaded."""
        keys = self._by_run.get(run_id)
        if keys is None:
            return None
        return sorted({self._by_key[k].model_id for k in keys if k in self._by_key})

    def forget_run(self, run_id: str) -> None:
        for key in self._by_run.pop(run_id, ()):
            self._by_key.pop(key, None)
