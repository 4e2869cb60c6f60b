"""Runs: create (validate, persist, dispatch), read, list, cancel, retry, results, samples.

Every method is tenant-scoped: another tenant's run answers NOT_FOUND, exactly as a
run that does not exist. Persist before dispatch: ``create`` writes the run, its tasks
and every subtask in one transaction, and only then hands the run to the engine.
"""

import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing

import anyio

from evald_server.app._pages import integer, keyset, page_query
from evald_server.app._rescoring import (
    RescoreSettings,
    check_rescore,
    rescore_tasks,
    rescored_spec,
)
from evald_server.app._sample_pages import SampleBudget, cost, fitted
from evald_server.app._types import Page, Run, Sample
from evald_server.config import ModelConfig, ServerConfig
from evald_server.datasets import ChatPrompt
from evald_server.domain import (
    RETRYABLE_STATES,
    AlreadyExists,
    ChoiceScoring,
    ErrorCategory,
    ErrorReason,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    NotFound,
    PromptFormat,
    ResourceExhausted,
    RunState,
    SubtaskPhase,
    SubtaskState,
    TaskType,
    field_error,
)
from evald_server.engine import (
    DatasetRef,
    Engine,
    ModelIdentity,
    RunEvent,
    RunSpec,
    ShotSourceProblem,
    TaskEvaluation,
    TaskModels,
    effective_options,
    shot_source,
    task_prompt,
    task_type_problems,
)
from evald_server.store import (
    DatasetRow,
    LiveRunLimitReached,
    NewRun,
    NewTask,
    RunRow,
    Store,
    TaskRow,
)

_SAMPLE_BATCH = 16  # rows read per store call while filling a ListSamples page

_LIVE = (RunState.PENDING, RunState.RUNNING)
CANCEL_WAIT_S = 5.0  # how long CancelRun waits for the run to end before it answers


_LOGPROB_SCORINGS = (ChoiceScoring.LOGPROBS, ChoiceScoring.LOGLIKELIHOOD)


def _check_completions_endpoint(
    spec: RunSpec, datasets: Sequence[DatasetRow], models: Mapping[str, ModelConfig]
) -> None:
    """A dataset whose prompts go plain (loglikelihood scoring, or PROMPT_FORMAT_PLAIN)
    needs every model of the run registered with ``completions``; loglikelihood scoring
    generates no answer, so a judge has nothing to grade there."""
    plain = [
        d
        for d in datasets
        if spec.prompt_format_for(DatasetRef(d.name, d.benchmark_version), d.task_type)
        is PromptFormat.PLAIN
    ]
    loglikelihood = [
        d
        for d in plain
        if spec.choice_scoring_for(DatasetRef(d.name, d.benchmark_version))
        is ChoiceScoring.LOGLIKELIHOOD
    ]
    if loglikelihood and spec.judge is not None:
        first = loglikelihood[0]
        message = (
            f"{first.name} {first.benchmark_version} uses loglikelihood scoring, which "
            "generates no answer for a judge to grade"
        )
        raise InvalidArgument(
            ErrorReason.RUN_SPEC_INVALID,
            f"invalid run spec: judge: {message}",
            field_violations=(FieldViolation("spec.judge", message),),
        )
    missing = [m for m in spec.models if "completions" not in models[m].endpoints]
    if not plain or not missing:
        return
    first = plain[0]
    ref = DatasetRef(first.name, first.benchmark_version)
    why = (
        "loglikelihood scoring"
        if spec.choice_scoring_for(ref) is ChoiceScoring.LOGLIKELIHOOD
        else "the plain prompt format"
    )
    message = (
        f"{first.name} {first.benchmark_version} uses {why}, which needs the completions "
        f"endpoint; model(s) {', '.join(missing)} are registered with "
        f'endpoints {list(models[missing[0]].endpoints)} (add "completions")'
    )
    raise InvalidArgument(
        ErrorReason.RUN_SPEC_INVALID,
        f"invalid run spec: models: {message}",
        metadata={"modelId": missing[0]},
        field_violations=(FieldViolation("spec.models", message),),
    )


def _check_run_choice_scoring(spec: RunSpec, datasets: Sequence[DatasetRow]) -> None:
    """A run-wide log-probability setting applies to multiple-choice datasets only: on a
    run without one it would change nothing, and silently."""
    if spec.choice_scoring not in _LOGPROB_SCORINGS:
        return
    if any(d.task_type is TaskType.MULTIPLE_CHOICE for d in datasets):
        return
    field = "spec.choice_scoring"
    kinds = ", ".join(f"{d.name} {d.benchmark_version} is {d.task_type.value}" for d in datasets)
    message = (
        f"{spec.choice_scoring.value} scoring needs a multiple_choice dataset; "
        f"the run has none ({kinds})"
    )
    raise field_error(
        field, message, f"invalid run spec: {field}: {message}", reason=ErrorReason.RUN_SPEC_INVALID
    )


def _check_reducers(spec: RunSpec, datasets: Sequence[DatasetRow]) -> None:
    """Every reducer applies to every dataset of the run: a per-sample correct answer,
    and an answer key for majority (``scoring.CORRECTNESS``)."""
    problems = task_type_problems(
        spec.reducers, [(f"{d.name} {d.benchmark_version}", d.task_type) for d in datasets]
    )
    if problems:
        raise InvalidArgument(
            ErrorReason.RUN_SPEC_INVALID,
            "invalid run spec: " + "; ".join(f"spec.{f}: {w}" for f, w in problems),
            field_violations=tuple(FieldViolation(f"spec.{f}", w) for f, w in problems),
        )


def _new_run(
    run_id: str, tenant: str, spec: RunSpec, request_id: str | None, request_hash: str | None
) -> NewRun:
    """The run row CreateRun and RescoreRun store, created now."""
    return NewRun(
        run_id=run_id,
        tenant=tenant,
        name=spec.name,
        spec=spec.to_json(),
        repeat=spec.repeat,
        created_at=time.time(),
        request_id=request_id,
        request_hash=request_hash,
    )


class RunService:
    def __init__(self, config: ServerConfig, store: Store, engine: Engine) -> None:
        self._config = config
        self._models: dict[str, ModelConfig] = {m.id: m for m in config.models}
        self._store = store
        self._engine = engine

    async def _owned(self, tenant: str, run_id: str) -> RunRow:
        run = await self._store.get_run(run_id) if run_id else None
        if run is None or run.tenant != tenant:
            raise NotFound(
                ErrorReason.RUN_NOT_FOUND, f"run {run_id!r} not found", metadata={"runId": run_id}
            )
        return run

    async def _tasks_of(self, run_id: str, task_ids: Sequence[str]) -> dict[str, TaskRow]:
        """The run's tasks by id; NOT_FOUND naming ``task_ids`` that are not among them
        (a run's listing filtered by a task it does not have is no empty answer)."""
        tasks = {t.task_id: t for t in await self._store.get_tasks(run_id)}
        unknown = [t for t in dict.fromkeys(task_ids) if t not in tasks]
        if unknown:
            raise NotFound(
                ErrorReason.RUN_NOT_FOUND,
                f"run {run_id} has no task {', '.join(map(repr, unknown))}",
                metadata={"runId": run_id, "taskIds": ",".join(unknown)},
            )
        return tasks

    async def _run(self, row: RunRow) -> Run:
        tasks = await self._store.get_tasks(row.run_id)
        return Run.of(row, tasks, now=time.time(), calls=self._engine.calls_in_flight())

    async def _earlier(self, tenant: str, request_id: str | None, request_hash: str) -> Run | None:
        """The run this ``request_id`` created before (ALREADY_EXISTS for another body)."""
        if request_id is None:
            return None
        if not 0 < len(request_id) <= 128:
            raise field_error(
                "request_id",
                "must be 1-128 characters",
                f"request_id must be 1-128 characters, got {len(request_id)}",
            )
        existing = await self._store.find_run_by_request(tenant, request_id)
        if existing is None:
            return None
        return await self._replay(existing, request_id, request_hash)

    async def create(self, tenant: str, spec: RunSpec, request_id: str | None = None) -> Run:
        """The new run, or the run this ``request_id`` created before."""
        request_hash = spec.body_hash()
        earlier = await self._earlier(tenant, request_id, request_hash)
        if earlier is not None:
            return earlier
        datasets = await self._validate(tenant, spec)
        run_id = f"run_{uuid.uuid4().hex[:16]}"
        tasks: list[NewTask] = []
        for model_id in spec.models:
            model = self._models[model_id]
            for dataset in datasets:
                ref = DatasetRef(dataset.name, dataset.benchmark_version)
                identity = ModelIdentity(
                    model_id=model.id,
                    provider=model.provider,
                    provider_model=model.provider_model,
                    params=spec.params_for(model.params, ref, dataset.task_type),
                    price=model.price,
                )
                ordinal = len(tasks)
                tasks.append(
                    NewTask(
                        task_id=f"{run_id}-t{ordinal}",
                        ordinal=ordinal,
                        model_id=model_id,
                        model=TaskModels(identity, self._judge_identity(spec)).to_json(),
                        dataset_id=dataset.dataset_id,
                        record_count=dataset.record_count,
                        judge_model_id=None if spec.judge is None else spec.judge.model_id,
                        judge_rounds=0 if spec.judge is None else spec.judge.rounds,
                    )
                )
        new = _new_run(run_id, tenant, spec, request_id, request_hash)
        try:
            row, created = await self._store.create_run(new, tasks, max_live_runs=self._cap)
        except LiveRunLimitReached as exc:
            raise self._over_cap(exc) from exc
        if not created:  # a concurrent create with the same request_id won
            return await self._replay(row, request_id or "", request_hash)
        await self._engine.register_run(run_id)
        return await self._run(row)

    @property
    def _cap(self) -> int:
        return self._config.limits.max_runs_in_flight_per_tenant

    def _over_cap(self, exc: LiveRunLimitReached) -> ResourceExhausted:
        return ResourceExhausted(
            ErrorReason.LIMIT_EXCEEDED,
            f"{exc.live} runs are in flight, the limit max_runs_in_flight_per_tenant is "
            f"{self._cap}",
            metadata={"limit": "max_runs_in_flight_per_tenant", "limitValue": self._cap},
        )

    async def rescore(
        self,
        tenant: str,
        run_id: str,
        settings: RescoreSettings,
        *,
        name: str = "",
        request_id: str | None = None,
    ) -> Run:
        """A new run that scores the finished run ``run_id``'s stored answers again
        (``_rescoring``): no provider call. NOT_FOUND for another tenant's or an unknown
        run, FAILED_PRECONDITION while it is not finished."""
        source = await self._owned(tenant, run_id)
        if not source.state.is_terminal:
            raise FailedPrecondition(
                ErrorReason.RUN_NOT_FINISHED,
                f"run {run_id} is {source.state.value}: only a finished run's answers can be "
                "scored again",
                metadata={"runId": run_id, "state": source.state.value},
            )
        source_spec = RunSpec.from_json(source.spec)
        spec = rescored_spec(source_spec, run_id, settings, name=name)
        request_hash = spec.body_hash()
        earlier = await self._earlier(tenant, request_id, request_hash)
        if earlier is not None:
            return earlier
        source_tasks = await self._store.get_tasks(run_id)
        datasets: dict[str, DatasetRow] = {}
        for task in source_tasks:
            if task.dataset_id not in datasets:
                found = await self._store.get_dataset(task.dataset_id)
                assert found is not None  # a run's datasets are never deleted
                datasets[task.dataset_id] = found
        check_rescore(spec, source_spec, datasets)
        # A code task's programs run again, in this server's sandbox as configured now.
        await self._check_sandbox(list(datasets.values()))
        new_id = f"run_{uuid.uuid4().hex[:16]}"
        new = _new_run(new_id, tenant, spec, request_id, request_hash)
        tasks = rescore_tasks(new_id, spec, source_tasks, datasets)
        try:
            row, created = await self._store.create_rescore_run(new, tasks, max_live_runs=self._cap)
        except LiveRunLimitReached as exc:
            raise self._over_cap(exc) from exc
        if not created:  # a concurrent rescore with the same request_id won
            return await self._replay(row, request_id or "", request_hash)
        await self._engine.start_rescore(new_id)
        return await self._run(row)

    def _judge_identity(self, spec: RunSpec) -> ModelIdentity | None:
        """The judge model's identity and effective parameters, frozen with each task."""
        if spec.judge is None:
            return None
        judge = self._models[spec.judge.model_id]
        return ModelIdentity(
            model_id=judge.id,
            provider=judge.provider,
            provider_model=judge.provider_model,
            params=judge.params.merged(spec.judge.params),
            price=judge.price,
        )

    async def _replay(self, existing: RunRow, request_id: str, request_hash: str) -> Run:
        if existing.request_hash != request_hash:
            raise AlreadyExists(
                ErrorReason.REQUEST_ID_CONFLICT,
                f"request_id {request_id!r} was used for a different run spec",
                metadata={"requestId": request_id, "runId": existing.run_id},
            )
        fresh = await self._store.get_run(existing.run_id)
        assert fresh is not None
        return await self._run(fresh)

    async def _validate(self, tenant: str, spec: RunSpec) -> list[DatasetRow]:
        for model_id in spec.models:
            if model_id not in self._models:
                raise NotFound(
                    ErrorReason.MODEL_NOT_FOUND,
                    f"model {model_id!r} is not in this server's registry",
                    metadata={"modelId": model_id},
                )
        if spec.judge is not None and spec.judge.model_id not in self._models:
            raise NotFound(
                ErrorReason.MODEL_NOT_FOUND,
                f"judge model {spec.judge.model_id!r} is not in this server's registry",
                metadata={"modelId": spec.judge.model_id, "field": "spec.judge.model_id"},
            )
        called = [*spec.models, *([spec.judge.model_id] if spec.judge is not None else [])]
        unpriced = [m for m in dict.fromkeys(called) if self._models[m].price is None]
        if spec.budget.max_cost_usd is not None and unpriced:
            what = f"models without a price cannot have a cost budget: {', '.join(unpriced)}"
            raise InvalidArgument(
                ErrorReason.RUN_SPEC_INVALID,
                f"invalid run spec: budget.max_cost_usd: {what}",
                field_violations=(FieldViolation("spec.budget.max_cost_usd", what),),
            )
        datasets = []
        for ref in spec.datasets:
            row = await self._store.find_dataset(tenant, ref.name, ref.benchmark_version)
            if row is None:
                raise NotFound(
                    ErrorReason.DATASET_VERSION_NOT_FOUND,
                    f"dataset {ref.name} {ref.benchmark_version} not found",
                    metadata={"name": ref.name, "benchmarkVersion": ref.benchmark_version},
                )
            datasets.append(row)
        for row in datasets:
            await self._validate_dataset_settings(tenant, spec, row)
        _check_run_choice_scoring(spec, datasets)
        await self._check_sandbox(datasets)
        _check_reducers(spec, datasets)
        _check_completions_endpoint(spec, datasets, self._models)
        limits = self._config.limits
        subtasks = sum(d.record_count for d in datasets) * len(spec.models) * spec.repeat
        if spec.judge is not None:  # each answer may get a judge subtask per round
            subtasks *= 1 + spec.judge.rounds
        if subtasks > limits.max_subtasks_per_run:
            raise ResourceExhausted(
                ErrorReason.LIMIT_EXCEEDED,
                f"the run would have {subtasks} subtasks, over max_subtasks_per_run "
                f"({limits.max_subtasks_per_run})",
                metadata={
                    "limit": "max_subtasks_per_run",
                    "limitValue": limits.max_subtasks_per_run,
                    "requested": subtasks,
                },
            )
        return datasets

    async def _check_sandbox(self, datasets: Sequence[DatasetRow]) -> None:
        """Code datasets run their programs in the sandbox: refused where it is off or
        cannot run here (the message names what is missing). Never unsandboxed."""
        code = [f"{d.name} {d.benchmark_version}" for d in datasets if d.task_type is TaskType.CODE]
        if not code:
            return
        sandbox = self._engine.code_runs.sandbox
        if sandbox is None:
            problem = (
                "the code sandbox is not enabled on this server ([sandbox] enabled = false "
                "in its configuration)"
            )
        else:
            check = await sandbox.check()
            if check.available:
                return
            problem = check.message
        raise FailedPrecondition(
            ErrorReason.SANDBOX_UNAVAILABLE,
            f"code dataset(s) {', '.join(code)} cannot be run: {problem}",
            metadata={"datasets": ",".join(code)},
        )

    async def _validate_dataset_settings(self, tenant: str, spec: RunSpec, row: DatasetRow) -> None:
        """Prompt examples that can be drawn; log-probability scoring only where it applies."""
        ref = DatasetRef(row.name, row.benchmark_version)
        try:
            await shot_source(
                self._store,
                tenant,
                row.task_type,
                effective_options(spec, row),
                own_record_count=row.record_count,
                field=f"spec.prompt ({row.name} {row.benchmark_version})",
            )
        except ShotSourceProblem as problem:
            error = NotFound if problem.not_found else InvalidArgument
            raise error(
                ErrorReason.DATASET_VERSION_NOT_FOUND
                if problem.not_found
                else ErrorReason.RUN_SPEC_INVALID,
                f"invalid run spec: {problem.field}: {problem.message}",
                metadata={"field": problem.field},
                field_violations=(FieldViolation(problem.field, problem.message),),
            ) from problem
        entry = spec.options_for(ref)
        if (
            entry is not None
            and entry.choice_scoring in _LOGPROB_SCORINGS
            and row.task_type is not TaskType.MULTIPLE_CHOICE
        ):
            field = "spec.dataset_options.choice_scoring"
            message = (
                f"{entry.choice_scoring.value} scoring needs a multiple_choice dataset; "
                f"{row.name} {row.benchmark_version} is {row.task_type.value}"
            )
            raise field_error(
                field,
                message,
                f"invalid run spec: {field}: {message}",
                reason=ErrorReason.RUN_SPEC_INVALID,
            )

    async def get(self, tenant: str, run_id: str) -> Run:
        return await self._run(await self._owned(tenant, run_id))

    async def list(
        self,
        tenant: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        states: Sequence[RunState] = (),
    ) -> Page[Run]:
        filters = {"states": sorted(s.value for s in states)}
        query = page_query(
            "runs", tenant, filters, keyset, page_size=page_size, page_token=page_token
        )
        rows = await self._store.list_runs(tenant, query.after, query.size + 1, states=states)
        page, next_token = query.cut(rows, lambda r: [r.created_at, r.run_id])
        return Page(tuple([await self._run(r) for r in page]), next_token)

    async def cancel(self, tenant: str, run_id: str) -> Run:
        """Cancel a live run and answer with the state the cancel produced: CANCELLED once
        its calls are aborted and its tasks with finished work scored, if that takes at
        most ``CANCEL_WAIT_S``; else the run as it is then (``cancel_requested`` set).
        A finished run is returned unchanged."""
        run = await self._owned(tenant, run_id)
        if not run.state.is_terminal:
            await self._engine.cancel_run(run_id)
            with anyio.move_on_after(CANCEL_WAIT_S):
                events = await self._engine.watch(run_id, run.last_seq)
                async with aclosing(events):
                    async for event in events:
                        if event.is_terminal:
                            break
        return await self.get(tenant, run_id)

    async def retry(
        self,
        tenant: str,
        run_id: str,
        task_ids: Sequence[str] = (),
        categories: Sequence[ErrorCategory] = (),
        *,
        reasons: Sequence[ErrorReason] = (),
        states: Sequence[SubtaskState] = (),
    ) -> tuple[Run, int]:
        """Re-queue a finished run's failed_permanent (or, when ``states`` says so,
        cancelled) subtasks, filtered by task, error category and reason; how many.
        A cancelled run's failed samples may be retried alone (``RETRYABLE_STATES``)."""
        run = await self._owned(tenant, run_id)
        wanted = tuple(dict.fromkeys(states)) or (SubtaskState.FAILED_PERMANENT,)
        not_retryable = [s for s in wanted if s not in RETRYABLE_STATES]
        if not_retryable:
            raise field_error(
                "states",
                "only failed_permanent and cancelled",
                f"states: {', '.join(s.value for s in not_retryable)} cannot be retried "
                "(only failed_permanent and cancelled)",
            )
        if not run.state.is_terminal:
            raise FailedPrecondition(
                ErrorReason.RUN_NOT_RETRYABLE,
                f"run {run_id} is {run.state.value}; only a finished run can be retried",
                metadata={"runId": run_id, "state": run.state.value},
            )
        source = RunSpec.from_json(run.spec).rescore_of
        if source is not None:  # its answers are copies: retrying them would call a model
            raise FailedPrecondition(
                ErrorReason.RUN_NOT_RETRYABLE,
                f"run {run_id} re-scores the answers of run {source} and makes no provider "
                f"call; retry run {source}, then rescore it again",
                metadata={"runId": run_id, "rescoredFromRunId": source},
            )
        known = {t.task_id for t in await self._store.get_tasks(run_id)}
        unknown = [t for t in task_ids if t not in known]
        if unknown:
            raise field_error(
                "task_ids",
                "not tasks of this run",
                f"task_ids not in run {run_id}: {', '.join(unknown)}",
                metadata={"runId": run_id},
            )
        report = await self._engine.retry_run(
            run_id,
            task_ids,
            [c.value for c in categories],
            reasons=[r.value for r in reasons],
            states=wanted,
        )
        if report.changed == 0:
            resume = ""
            if run.cancel_requested and SubtaskState.CANCELLED not in wanted:
                resume = "; to resume its cancelled samples, retry them (states: cancelled)"
            raise FailedPrecondition(
                ErrorReason.RUN_NOT_RETRYABLE,
                f"run {run_id} has no {' or '.join(s.value for s in wanted)} subtasks "
                f"matching the request{resume}",
                metadata={"runId": run_id},
            )
        return await self.get(tenant, run_id), report.changed

    async def watch(self, tenant: str, run_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        await self._owned(tenant, run_id)
        return await self._engine.watch(run_id, after_seq)

    async def results(
        self,
        tenant: str,
        run_id: str,
        *,
        task_ids: Sequence[str] = (),
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[TaskEvaluation]:
        await self._owned(tenant, run_id)
        await self._tasks_of(run_id, task_ids)
        filters = {"run": run_id, "tasks": sorted(task_ids)}
        query = page_query(
            "results", tenant, filters, integer, page_size=page_size, page_token=page_token
        )
        rows = [
            r for r in await self._store.read_results(run_id) if not task_ids or r[0] in task_ids
        ]
        # Results are few (one per task): an offset into the whole list, read at once.
        end = query.after + query.size
        page, next_token = query.cut(rows[query.after : end + 1], lambda _: [end])
        return Page(tuple(TaskEvaluation.from_json(r[1]) for r in page), next_token)

    async def samples(
        self,
        tenant: str,
        run_id: str,
        *,
        task_id: str | None = None,
        states: Sequence[SubtaskState] = (),
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[Sample]:
        run = await self._owned(tenant, run_id)
        tasks = await self._tasks_of(run_id, [task_id] if task_id else [])
        filters = {"run": run_id, "task": task_id or "", "states": sorted(s.value for s in states)}
        query = page_query(
            "samples", tenant, filters, integer, page_size=page_size, page_token=page_token
        )
        cursor, limit = query.after, query.size
        spec = RunSpec.from_json(run.spec)
        prompts: dict[str, tuple[TaskType, ChatPrompt]] = {}

        async def prompt_of(task_id: str) -> tuple[TaskType, ChatPrompt]:
            if task_id not in prompts:  # only the tasks this page shows
                dataset = await self._store.get_dataset(tasks[task_id].dataset_id)
                assert dataset is not None
                prompt = await task_prompt(self._store, tenant, spec, dataset)
                prompts[task_id] = (dataset.task_type, prompt)
            return prompts[task_id]

        budget = SampleBudget.for_message_limit(self._config.limits.max_message_bytes)
        samples: list[Sample] = []
        used = 0
        more = True
        while more and len(samples) < limit:
            # Small batches: a page full of large rows stops reading early.
            want = min(limit - len(samples), _SAMPLE_BATCH)
            rows = await self._store.run_subtasks(
                run_id,
                task_id or None,
                states,
                cursor,
                want + 1,
                output_chars=budget.output_chars,
                # A state filter asks which calls are in that state: judge calls too
                # (as the run's counters count them); else the answers, each with its
                # judgement.
                phase=None if states else SubtaskPhase.ANSWER,
            )
            more = len(rows) > want
            for row in rows[:want]:
                shown = Sample.of(row, *(await prompt_of(row.task_id)))
                sample = fitted(shown, budget, row.output_bytes)
                if samples and used + cost(sample) > budget.page_bytes:
                    more = True  # this row opens the next page
                    break
                samples.append(sample)
                used += cost(sample)
                cursor = row.row_id
            else:
                continue
            break
        next_token = query.token_after([cursor]) if more else ""
        return Page(tuple(samples), next_token)
