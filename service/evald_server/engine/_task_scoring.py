"""Watch-evaluation: score each task the moment its subtasks are all terminal.

Scoring runs in the scoring pool's worker processes, so the event loop (and every
other task's inference) carries on meanwhile. A task with permanently failed or
cancelled subtasks is scored on its successes and marked partial; one with no success
is not scored (failed, or cancelled); so is a judged task with answers the judge could
not grade (partial). A scorer failure fails that task alone, with an
EVAL_OPERATOR_ERROR. The result (assembled in ``_results``) and the task's final state
are written together with the ``task_scored`` event (and the run's end when it was the
last task).
"""

import dataclasses
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

import anyio
import anyio.abc

from evald_server.domain import (
    Counters,
    EvalError,
    RunState,
    SubtaskPhase,
    TaskState,
    TaskType,
    task_outcome,
)
from evald_server.engine._code_runs import CodeRuns, ExecutionFailed, with_pass_at_k
from evald_server.engine._judge_results import JudgeReport, judge_answers
from evald_server.engine._judge_spec import JudgeSpec
from evald_server.engine._page_scoring import PageScoring
from evald_server.engine._profile import build_profile
from evald_server.engine._prompting import task_prompt
from evald_server.engine._results import (
    ExecutionProfile,
    JudgeProvenance,
    ModelIdentity,
    assemble_evaluation,
    failure_errors,
    unscorable_error,
)
from evald_server.engine._spec import DatasetRef, RunSpec
from evald_server.engine._task_models import TaskModels
from evald_server.scoring import (
    UNSCORABLE_FLAG,
    EncodedPage,
    EncodedSample,
    ReducedMetric,
    SampleSource,
    ScoreReport,
    ScoringFailure,
    reduce_samples,
)
from evald_server.store import (
    EventRow,
    JudgeVerdictRow,
    ProfileInputs,
    SampleScoreRow,
    Store,
    TaskFinish,
)

_log = logging.getLogger(__name__)
_PAGE = 2000


class ScoringPort(Protocol):
    """What the task scorer needs of the scoring pool."""

    async def score(
        self, task_type: TaskType, samples: SampleSource, *, seed: int, timeout_s: float
    ) -> ScoreReport: ...


class TaskScorer:
    """Scores the tasks it is given (``schedule``) whose subtasks are all terminal, at
    most ``concurrency`` at once, and writes each result with the task's final state."""

    def __init__(
        self,
        store: Store,
        scoring: ScoringPort,
        publish: Callable[[Iterable[EventRow]], None],
        on_run_finished: Callable[[str, RunState], None],
        *,
        concurrency: int = 2,
        pages: PageScoring | None = None,
        code: CodeRuns | None = None,
    ) -> None:
        self._store = store
        self._code = code
        self._scoring = scoring
        self._pages = pages
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
        read: list[ProfileInputs] = []

        async def read_inputs() -> None:
            read.append(await self._store.profile_inputs(task_id))

        async with anyio.create_task_group() as tg:
            # Read while the task is scored (a worker's job): its answers no longer change.
            tg.start_soon(read_inputs)
            if dataset.task_type is TaskType.CODE:
                report, errors = await self._code_report(task_id, spec, counters)
            else:
                report, errors = await self._report(task_id, dataset.task_type, spec, counters)
        models = TaskModels.from_json(task.model)
        judging: JudgeReport | None = None
        judge_profile: ExecutionProfile | None = None
        judge_errors: list[EvalError] = []
        (inputs,) = read
        if spec.judge is not None and models.judge is not None:
            judging = await self._judge(task_id, spec.judge, spec.seed, inputs.counters.succeeded)
            judge_inputs = await self._store.profile_inputs(task_id, phase=SubtaskPhase.JUDGE)
            judge_profile = build_profile(
                judge_inputs,
                scoring_time_s=0.0,
                priced=models.judge.price is not None,
            )
            judge_errors = failure_errors(judge_inputs.failure_reasons, "judge call(s)")
            if report is not None:
                report = dataclasses.replace(
                    report,
                    metrics={**report.metrics, **judging.metrics},
                    uncertainty={**report.uncertainty, **judging.uncertainty},
                )
        reduced = await _reduce(report, spec, dataset.record_count)
        if report is not None:
            report = with_pass_at_k(report, reduced)  # a code task's payload lists them too
        scoring_time = time.perf_counter() - started
        errors.extend(failure_errors(inputs.failure_reasons))
        errors.extend(judge_errors)
        unscorable = () if report is None else report.unscorable
        if report is not None and unscorable:
            errors.append(unscorable_error(report.scorer, unscorable))
        state = task_outcome(
            counters,
            scorer_failed=report is None and counters.succeeded > 0,
            unjudged=0 if judging is None else judging.unjudged,
            unscorable=len(unscorable),
        )
        now = time.time()
        evaluation = assemble_evaluation(
            task,
            dataset,
            state=state,
            report=report,
            profile=build_profile(
                inputs,
                scoring_time_s=scoring_time,
                priced=models.answer.price is not None,
            ),
            errors=errors,
            prompt_template_sha256=prompt.sha256(),
            seed=spec.seed,
            now=now,
            prompt_format=spec.prompt_format_for(
                DatasetRef(dataset.name, dataset.benchmark_version), dataset.task_type
            ),
            judge=None
            if spec.judge is None or models.judge is None
            else _judge_provenance(models.judge, spec.judge, judging),
            judge_profile=judge_profile,
            reduced=reduced,
            rescored_from=spec.rescore_of,
        )
        scores: Iterable[SampleScoreRow] = _sample_rows(report, judging)
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
                clear_scores=report is None,  # pages may have stored some
            )
        )
        self.scored += 1
        self._publish(finish.events)
        if finish.run_state is not None:
            self._on_run_finished(task.run_id, finish.run_state)

    async def _report(
        self, task_id: str, task_type: TaskType, spec: RunSpec, counters: Counters
    ) -> tuple[ScoreReport | None, list[EvalError]]:
        """The task's report from its pages or from the store; None with the scorer's
        error when scoring failed, None alone when nothing succeeded."""
        if counters.succeeded == 0:
            if self._pages is not None:
                self._pages.discard(task_id)
            return None, []
        try:
            report = None
            if self._pages is not None:
                report = await self._pages.finish(task_id, counters.succeeded, seed=spec.seed)
            if report is None:
                report = await self._scoring.score(
                    task_type,
                    StoredSamples(self._store, task_id),
                    seed=spec.seed,
                    timeout_s=spec.scoring_timeout_s,
                )
        except ScoringFailure as failure:
            return None, [failure.error]
        return report, []

    async def _code_report(
        self, task_id: str, spec: RunSpec, counters: Counters
    ) -> tuple[ScoreReport | None, list[EvalError]]:
        """A code task's report: its programs run first (those without a stored run:
        ``_code_runs``), then scored; its pass@k comes with the run's reducers."""
        if counters.succeeded > 0:
            if self._code is None:
                raise RuntimeError("a code task is scored by an engine without code runs")
            try:
                await self._code.execute_task(task_id)
            except ExecutionFailed as failure:
                return None, [failure.error]
            finally:
                self._code.scored(task_id)
        return await self._report(task_id, TaskType.CODE, spec, counters)

    async def _judge(self, task_id: str, spec: JudgeSpec, seed: int, answered: int) -> JudgeReport:
        rows: list[JudgeVerdictRow] = []
        after = 0
        while page := await self._store.task_verdicts(task_id, after, _PAGE):
            rows.extend(page)
            after = page[-1].row_id
        # Off the event loop: the bootstrap is numpy work.
        return await anyio.to_thread.run_sync(
            functools.partial(judge_answers, rows, spec, answered=answered, seed=seed)
        )


async def _reduce(
    report: ScoreReport | None, spec: RunSpec, records: int
) -> tuple[ReducedMetric, ...]:
    """The run's reducers over the task's records (off the event loop: a bootstrap
    each); none without a report or a per-sample correctness."""
    if not spec.reducers or report is None or report.correctness is None:
        return ()
    return await anyio.to_thread.run_sync(
        functools.partial(
            reduce_samples,
            report.correctness,
            [r.asked() for r in spec.reducers],
            records_expected=records,
            seed=spec.seed,
        )
    )


def _sample_rows(
    report: ScoreReport | None, judging: JudgeReport | None
) -> Iterator[SampleScoreRow]:
    """The per-sample rows to store: the scorer's (a generator over its columns, which
    the store streams into its executemany), each with its answer's judgement."""
    judgements = {} if judging is None else dict(judging.judgements)
    if report is not None:
        for s in report.sample_scores:
            row_id = int(s.subtask_id)
            judgement = judgements.pop(row_id, None)
            yield SampleScoreRow(
                row_id,
                s.scores,
                s.correct,
                s.flags,
                None if judgement is None else judgement.to_json(),
            )
        for sample in report.unscorable:  # left out of the metrics, flagged
            row_id = int(sample.subtask_id)
            judgement = judgements.pop(row_id, None)
            yield SampleScoreRow(
                row_id,
                {},
                None,
                (UNSCORABLE_FLAG,),
                None if judgement is None else judgement.to_json(),
            )
    for row_id, judgement in judgements.items():  # judged but not scored
        yield SampleScoreRow(row_id, None, None, (), judgement.to_json())


def _judge_provenance(
    identity: ModelIdentity, spec: JudgeSpec, judging: JudgeReport | None
) -> JudgeProvenance:
    return JudgeProvenance(
        model_id=identity.model_id,
        provider=identity.provider,
        provider_model=identity.provider_model,
        params=identity.params.model_dump(mode="json"),
        rubric_sha256=spec.rubric_sha256(),
        score_format=spec.score_format.value,
        scale_min=spec.scale_min,
        scale_max=spec.scale_max,
        pass_threshold=spec.threshold,
        rounds=spec.rounds,
        parse_retries=spec.parse_retries,
        judged_samples=0 if judging is None else judging.judged,
        unjudged_samples=0 if judging is None else judging.unjudged,
    )


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
                    row.execution,
                )
                for row in rows
            )
        )
