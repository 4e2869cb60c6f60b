"""Watch-evaluation: score each task the moment its subtasks are all terminal.

Scoring runs in the scoring pool's worker processes, so the event loop (and every
other task's inference) carries on meanwhile. A task with permanently failed or
cancelled subtasks is scored on its successes and marked partial; one with no success
is not scored (failed, or cancelled). A scorer failure fails that task alone, with an
EVAL_OPERATOR_ERROR. The result and the task's final state are written together with
the ``task_scored`` event (and the run's end when it was the last task).
"""

import logging
import platform
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol

import anyio
import anyio.abc

import evald_server
from evald_server.domain import (
    RESULT_STATUS,
    ErrorReason,
    EvalError,
    RunState,
    TaskState,
    TaskType,
    task_outcome,
)
from evald_server.engine._profile import build_profile
from evald_server.engine._prompting import task_prompt
from evald_server.engine._results import (
    CONTRACT_VERSION,
    BenchmarkRef,
    ModelIdentity,
    Provenance,
    TaskEvaluation,
)
from evald_server.engine._spec import RunSpec
from evald_server.scoring import (
    EncodedPage,
    EncodedSample,
    SampleSource,
    ScoreReport,
    ScoringFailure,
    scorer_dependencies,
)
from evald_server.store import EventRow, SampleScoreRow, Store, TaskFinish

_log = logging.getLogger(__name__)
_PAGE = 2000


class ScoringPort(Protocol):
    """What the watcher needs of the scoring pool."""

    async def score(
        self, task_type: TaskType, samples: SampleSource, *, seed: int, timeout_s: float
    ) -> ScoreReport: ...


class Watcher:
    def __init__(
        self,
        store: Store,
        scoring: ScoringPort,
        publish: Callable[[Iterable[EventRow]], None],
        on_run_finished: Callable[[str, RunState], None],
        *,
        concurrency: int = 2,
    ) -> None:
        self._store = store
        self._scoring = scoring
        self._publish = publish
        self._on_run_finished = on_run_finished
        self._slots = anyio.Semaphore(concurrency)
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._wake = anyio.Event()
        self.scored = 0

    def schedule(self, task_ids: Iterable[str]) -> None:
        for task_id in task_ids:
            if task_id not in self._queued:
                self._queued.add(task_id)
                self._queue.append(task_id)
        self._wake.set()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            task_status.started()
            while True:
                while not self._queue:
                    self._wake = anyio.Event()
                    await self._wake.wait()
                task_id = self._queue.popleft()
                await self._slots.acquire()
                tg.start_soon(self._score_one, task_id)

    async def _score_one(self, task_id: str) -> None:
        try:
            await self.score_task(task_id)
        except Exception:  # a bug: log it, leave the task in 'scoring' for the next start
            _log.exception("scoring task %s failed unexpectedly", task_id)
        finally:
            self._queued.discard(task_id)
            self._slots.release()

    async def score_task(self, task_id: str) -> None:
        task = await self._store.get_task(task_id)
        if task is None or task.state is not TaskState.SCORING:
            return
        if not await self._store.claim_scoring(task_id):
            return  # another replica holds its scoring job (a shared store)
        run = await self._store.get_run(task.run_id)
        dataset = await self._store.get_dataset(task.dataset_id)
        assert run is not None
        assert dataset is not None
        spec = RunSpec.from_json(run.spec)
        prompt = await task_prompt(self._store, run.tenant, spec, dataset)
        counters = await self._store.recount_task(task_id)
        started = time.perf_counter()
        report: ScoreReport | None = None
        errors: list[EvalError] = []
        if counters.succeeded > 0:
            try:
                report = await self._scoring.score(
                    dataset.task_type,
                    StoredSamples(self._store, task_id),
                    seed=spec.seed,
                    timeout_s=spec.scoring_timeout_s,
                )
            except ScoringFailure as failure:
                errors.append(failure.error)
        scoring_time = time.perf_counter() - started
        inputs = await self._store.profile_inputs(task_id)
        errors.extend(
            EvalError.of(
                ErrorReason(reason),
                f"{count} sample(s) failed permanently with {reason}",
                samples=count,
            )
            for reason, count in inputs.failure_reasons
            if reason in ErrorReason.__members__.values()
        )
        state = task_outcome(counters, scorer_failed=report is None and counters.succeeded > 0)
        now = time.time()
        evaluation = TaskEvaluation(
            task_id=task_id,
            run_id=task.run_id,
            task_type=dataset.task_type,
            model=ModelIdentity.from_json(task.model),
            benchmark=BenchmarkRef(
                dataset.name,
                dataset.benchmark_version,
                dataset.content_sha256,
                dataset.record_count,
                dataset_id=dataset.dataset_id,
            ),
            status=RESULT_STATUS[state],
            report=report,
            profile=build_profile(inputs, scoring_time_s=scoring_time),
            errors=tuple(errors),
            provenance=Provenance(
                contract_version=CONTRACT_VERSION,
                evald_version=evald_server.__version__,
                scorer=report.scorer if report is not None else "",
                prompt_template_sha256=prompt.sha256(),
                dataset_sha256=dataset.content_sha256,
                python_version=platform.python_version(),
                platform=f"{sys.platform}-{platform.machine()}",
                bootstrap_seed=spec.seed,
                dependencies=scorer_dependencies(dataset.task_type) if report is not None else {},
            ),
            created_at=now,
        )
        scores: Iterable[SampleScoreRow] = ()
        if report is not None:
            # A generator over the report's columns: the store streams it into its
            # executemany, one row object at a time.
            scores = (
                SampleScoreRow(int(s.subtask_id), s.scores, s.correct, s.flags)
                for s in report.sample_scores
            )
        body = evaluation.to_json()
        finish = await self._store.finish_task(
            TaskFinish(
                task_id=task_id,
                state=state,
                result_status=evaluation.status.value,
                result=body,
                sample_scores=scores,
                event_payload=body,
                time=now,
            )
        )
        self.scored += 1
        self._publish(finish.events)
        if finish.run_state is not None:
            self._on_run_finished(task.run_id, finish.run_state)


class StoredSamples:
    """A task's succeeded outputs as the scoring pool reads them: one page at a time.

    A sample's ``subtask_id`` is the subtask's row id: the scorer only echoes it back in
    its per-sample scores, and an int-like key needs no lookup table to find the row
    again. ``input_text`` stays empty: the scorer shows the record's own input in its
    worst examples, and 100,000 rendered prompts would only cost memory.
    """

    def __init__(self, store: Store, task_id: str, page_size: int = _PAGE) -> None:
        self._store = store
        self._task_id = task_id
        self._page_size = page_size
        self._after = 0
        self._done = False

    def __aiter__(self) -> "StoredSamples":
        return self

    async def __anext__(self) -> EncodedPage:
        if self._done:
            raise StopAsyncIteration
        rows = await self._store.task_outputs(self._task_id, self._after, self._page_size)
        if not rows:
            self._done = True
            raise StopAsyncIteration
        self._after = rows[-1].row_id
        return EncodedPage(
            tuple(
                EncodedSample(
                    str(row.row_id),
                    row.record_id,
                    row.repeat_index,
                    row.record_json,
                    row.output,
                    row.top_logprobs,
                )
                for row in rows
            )
        )
