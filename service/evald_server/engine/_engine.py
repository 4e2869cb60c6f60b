"""The engine: durable runs executed under three limits, scored as each task finishes.

``Engine.run`` is an anyio service (``await tg.start(engine.run)``): on start it resumes
what a previous process left (subtasks left ``running`` go back to pending without
spending a retry, live runs are dispatched again, finished tasks not yet scored are
scored), then runs the committer, the dispatcher, the task scorer, the progress
tracker and the lane monitor until ``drain``.

The lane monitor samples every model's lane: one with ready work and no provider call
in flight for ``stall_after_s`` is *stalled* — logged as a warning with its state
(buffered work, the limits it waits on, recent errors), shown in the progress events
of the runs with work there, and logged again every ``stall_after_s`` while it lasts.
"""

import functools
import logging
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence

import anyio
import anyio.abc

from evald_server.config import ServerConfig
from evald_server.domain import (
    ErrorReason,
    EvalError,
    OutcomeKind,
    RunState,
    SubtaskPhase,
    SubtaskState,
    TaskState,
    TaskType,
)
from evald_server.engine._code_runs import CodeRuns, sandbox_of
from evald_server.engine._committer import Committer
from evald_server.engine._contexts import TaskContexts, task_contexts
from evald_server.engine._cost import RunBudgets
from evald_server.engine._dispatcher import Dispatcher
from evald_server.engine._events import EventHub, RunEvent
from evald_server.engine._lanes import LaneState
from evald_server.engine._limits import Limiter, LimitStats
from evald_server.engine._page_scoring import PageScoring, PageScoringPort
from evald_server.engine._progress import ModelActivity
from evald_server.engine._progress_tracker import ProgressTracker
from evald_server.engine._prompting import task_prompt
from evald_server.engine._rate_control import RateControl, RateSettings, RateStats
from evald_server.engine._response_cache import ResponseCache, cache_settings
from evald_server.engine._shares import CapacityShares
from evald_server.engine._spec import DatasetRef, RunSpec
from evald_server.engine._store_changes import StoreChanges
from evald_server.engine._task_models import TaskModels
from evald_server.engine._task_scoring import ScoringPort, TaskScorer
from evald_server.providers import Provider
from evald_server.store import (
    CompletionReport,
    Shares,
    Store,
    StoreError,
    SubtaskOutcome,
    TaskRow,
    TransitionReport,
)

_log = logging.getLogger(__name__)
FAILING_AFTER = 3  # consecutive failed calls of a model before a warning is logged


class Engine:
    """The engine of one server process, tuned by its configuration: the server-wide
    limit (``[limits]``), each model's limit and rate control (``[[models]]``), the
    commit, heartbeat and scoring tuning (``[engine]``), the response cache
    (``[cache]``) and the stall warning (``[server]``)."""

    def __init__(
        self,
        store: Store,
        providers: Mapping[str, Provider],
        scoring: ScoringPort,
        config: ServerConfig,
        *,
        rng: random.Random | None = None,
    ) -> None:
        tuning = config.engine
        self.store = store
        self._providers = providers
        self.limiter = Limiter(
            config.limits.max_inflight, {m.id: m.max_concurrency for m in config.models}
        )
        self.rate = RateControl(
            self.limiter, {m.id: RateSettings.of(m) for m in config.models}, providers
        )
        self.budgets = RunBudgets()
        self.events = EventHub(store, heartbeat_s=tuning.heartbeat_s)
        self._contexts = TaskContexts()
        # Tasks scored page by page as their outcomes commit (when the pool can).
        self.pages = (
            PageScoring(scoring, store.store_sample_scores, page_size=tuning.score_page_size)
            if isinstance(scoring, PageScoringPort)
            else None
        )
        self.cache = ResponseCache(store, cache_settings(config))
        # Code tasks' programs, run in the sandbox before the task is scored.
        self.code_runs = CodeRuns(store, sandbox_of(config.sandbox))
        self.committer = Committer(
            store,
            self._on_committed,
            max_batch=tuning.commit_batch,
            max_delay_s=tuning.commit_delay_s,
        )
        self.dispatcher = Dispatcher(
            store,
            self.limiter,
            providers,
            self.committer,
            self._contexts,
            self.events.publish,
            rng=rng,
            rate=self.rate,
            budgets=self.budgets,
            on_budget_reached=self._budget_reached,
            on_answer=None if self.pages is None else self.pages.answered,
            cache=self.cache,
        )
        self.task_scorer = TaskScorer(
            store,
            scoring,
            self.events.publish,
            self._on_run_finished,
            concurrency=tuning.scoring_concurrency,
            pages=self.pages,
            code=self.code_runs,
        )
        self.stall_after_s = config.server.stall_warning_s
        self.progress = ProgressTracker(
            store,
            self.events.publish,
            calls=self.dispatcher.calls_by_task,
            activity=self.model_activity,
        )
        # Runs created, cancelled or finished by other replicas of a shared store.
        self.store_changes = StoreChanges(
            store,
            register_run=self.register_run,
            run_models=self._run_models,
            forget_run=self._forget_run,
            dispatcher=self.dispatcher,
            events=self.events,
            task_scorer=self.task_scorer,
        )
        self.shares = CapacityShares(
            store,
            self.limiter,
            sorted(providers),
            self.dispatcher.run_slots_changed,
            rate=self.rate,
            balanced=self._balanced,
            model_share_changed=self.dispatcher.model_share_changed,
        )
        self._peers_seen = False  # another replica has shared the store since the start
        self._stall_warned: dict[str, float] = {}  # model id -> when last warned
        self._failing: set[str] = set()  # models warned about a streak of failed calls
        self._dispatcher_done = anyio.Event()
        self._committer_done = anyio.Event()
        self._stopped = anyio.Event()
        self._draining = False
        # Called with every committed batch (the metrics endpoint counts outcomes here).
        self.outcome_observers: list[Callable[[Sequence[SubtaskOutcome]], None]] = []

    # -- lifecycle -----------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        async with anyio.create_task_group() as tg:
            await self.shares.balance_once()  # a joining replica starts from its share
            await self._resume()
            tg.start_soon(_until_done, self.committer.run, self._committer_done)
            tg.start_soon(_until_done, self.dispatcher.run, self._dispatcher_done)
            await tg.start(self.code_runs.run)
            await tg.start(self.task_scorer.run)
            if self.pages is not None:
                await tg.start(self.pages.run)
            await tg.start(self.progress.run)
            tg.start_soon(self._monitor_lanes)
            tg.start_soon(self.store_changes.run)
            tg.start_soon(self.shares.run)
            task_status.started()
            await self._stopped.wait()
            tg.cancel_scope.cancel()

    async def drain(self, grace_s: float = 0.0) -> None:
        """Stop claiming; give the calls in flight up to ``grace_s`` to finish (an answer
        already paid for is kept, not asked for again after a restart); abort the rest
        (back to pending, no retry spent); write every outcome, and stop. Scoring in
        progress is abandoned: those tasks stay in ``scoring`` and are scored on the
        next start."""
        if self._draining:
            await self._stopped.wait()
            return
        self._draining = True
        self.dispatcher.stop()
        with anyio.move_on_after(grace_s):
            await self.dispatcher.wait_idle()
        self.dispatcher.abort_inflight()
        await self._dispatcher_done.wait()
        await self.committer.close()
        await self._committer_done.wait()
        self._stopped.set()

    @property
    def draining(self) -> bool:
        return self._draining

    async def _resume(self) -> None:
        requeued = await self.store.requeue_running(owner=None, now=time.time())
        live = await self.store.live_run_ids()
        for run_id in live:
            await self.register_run(run_id)
        self.task_scorer.schedule(await self.store.scoring_task_ids())
        if requeued or live:
            _log.info("resumed %d live run(s); %d subtask(s) requeued", len(live), requeued)

    # -- runs ----------------------------------------------------------------------------

    async def register_run(self, run_id: str) -> None:
        """Load a run's task contexts and hand its work to the dispatcher."""
        run = await self.store.get_run(run_id)
        if run is None or run.state.is_terminal:
            return
        spec = RunSpec.from_json(run.spec)
        tasks = await self.store.get_tasks(run_id)
        contexts = []
        for task in tasks:
            dataset = await self.store.get_dataset(task.dataset_id)
            assert dataset is not None
            contexts += task_contexts(
                task.task_id,
                run_id,
                TaskModels.from_json(task.model),
                spec,
                (DatasetRef(dataset.name, dataset.benchmark_version), dataset.task_type),
                await task_prompt(self.store, run.tenant, spec, dataset),
                functools.partial(self._cache_scope, spec, run.tenant),
            )
        self._contexts.load(run_id, contexts)
        if self.pages is not None:
            for task in tasks:
                # A judged task's count grows with its judge phase: scored whole.
                if (
                    not task.state.is_terminal
                    and task.counters.succeeded == 0
                    and TaskModels.from_json(task.model).judge is None
                ):
                    self.pages.open(
                        task.task_id,
                        run_id,
                        self._contexts[task.task_id].task_type,
                        task.counters.total,
                        spec.scoring_timeout_s,
                    )
        self.limiter.add_run(run_id, spec.max_concurrency)
        if spec.max_concurrency is not None:
            await self.shares.balance_once()  # a run limit is global too: take the share
        spent_out = self.budgets.track(run_id, spec.budget, run.cost)
        if spent_out is not None and not run.cancel_requested:
            await self._finish_cancel(run_id, reason=spent_out)  # reached before a restart
            return
        live = {
            m
            for t in tasks
            if t.state in (TaskState.PENDING, TaskState.RUNNING)
            for m in _models_of(t)
        }
        if run.cancel_requested:
            await self._finish_cancel(run_id)
            return
        for model_id in sorted(live - set(self._providers)):
            await self._fail_missing_model(run_id, model_id)
        self.progress.started(run_id)
        self.dispatcher.add_work(run_id, sorted(live & set(self._providers)))

    async def start_rescore(self, run_id: str) -> None:
        """A rescored run (``Store.create_rescore_run``): registered as any run, and its
        tasks, already in ``scoring``, handed to the task scorer."""
        await self.register_run(run_id)
        tasks = await self.store.get_tasks(run_id)
        self.task_scorer.schedule(t.task_id for t in tasks if t.state is TaskState.SCORING)

    async def _fail_missing_model(self, run_id: str, model_id: str) -> None:
        error = EvalError.of(
            ErrorReason.MODEL_NOT_FOUND,
            f"model {model_id!r} is no longer configured on this server",
            modelId=model_id,
        )
        self.task_scorer.schedule(
            await self.store.fail_model_work(run_id, model_id, error, time.time())
        )

    async def cancel_run(self, run_id: str) -> TransitionReport:
        report = await self._finish_cancel(run_id)
        await self.dispatcher.cancel_run(run_id)
        return report

    async def _budget_reached(self, run_id: str, reason: str) -> None:
        """A run spent its budget: nothing new starts (the dispatcher stopped it
        already); its waiting work is cancelled, the calls in flight finish and count."""
        _log.info("run %s: %s; cancelling what has not started", run_id, reason)
        await self._finish_cancel(run_id, reason=reason)
        await self.dispatcher.cancel_run(run_id, abort_calls=False)

    async def _balanced(self, balance: Shares) -> None:
        await self.dispatcher.give_back_unstartable()
        await self._check_budgets(balance)

    async def _check_budgets(self, balance: Shares) -> None:
        """Each balancing, with other replicas on the store: read the spent totals of the
        runs with a budget again (every replica's committed outcomes move them), and end
        a run that has now reached its budget as if its own charge had reached it. The
        other replicas stop through the change feed's cancel."""
        self._peers_seen = self._peers_seen or balance.replicas > 1
        if not self._peers_seen:
            return  # alone: its own charges are all the store's totals ever get
        for run_id in self.budgets.tracked():
            try:
                run = await self.store.get_run(run_id)
            except StoreError as exc:  # the database away: the next balancing reads again
                _log.warning("could not read run %s's spent totals: %s", run_id, exc)
                return
            if run is None or run.state.is_terminal:
                continue
            reason = self.budgets.refresh(run_id, run.cost)
            if reason is not None and not run.cancel_requested:
                self.dispatcher.stop_run(run_id)
                await self._budget_reached(run_id, reason)

    async def _finish_cancel(self, run_id: str, *, reason: str | None = None) -> TransitionReport:
        if self.pages is not None:
            self.pages.discard_run(run_id)  # a cancel drops outcomes in flight
        report = await self.store.cancel_run(run_id, time.time(), reason=reason)
        self.events.publish(report.events)
        self.task_scorer.schedule(report.finished_tasks)
        return report

    async def retry_run(
        self,
        run_id: str,
        task_ids: Sequence[str],
        categories: Sequence[str],
        *,
        reasons: Sequence[str] = (),
        states: Sequence[SubtaskState] = (SubtaskState.FAILED_PERMANENT,),
    ) -> TransitionReport:
        report = await self.store.retry_failed(
            run_id, task_ids, categories, time.time(), reasons=reasons, states=states
        )
        if report.changed:
            self.events.publish(report.events)
            await self.register_run(run_id)
        return report

    async def watch(self, run_id: str, after_seq: int) -> AsyncGenerator[RunEvent, None]:
        """Validate the cursor now (errors raise here), then iterate the events."""
        return await self.events.subscribe(run_id, after_seq)

    def limiter_stats(self) -> list[LimitStats]:
        return self.limiter.stats()

    def rate_stats(self) -> list[RateStats]:
        return self.rate.stats()

    def lane_states(self) -> list[LaneState]:
        """Per configured model: buffered work, calls in flight, waiting limits, errors."""
        return self.dispatcher.lane_states()

    def calls_in_flight(self) -> Mapping[str, int]:
        """Provider calls in flight per task id (live; not stored)."""
        return self.dispatcher.calls_by_task

    def model_activity(self, run_id: str, model_ids: Sequence[str]) -> list[ModelActivity]:
        """One row per model of a run, as its progress snapshots show them."""
        states = {s.model_id: s for s in self.lane_states()}
        rates = {r.model_id: r for r in self.rate.stats()}
        now = time.time()
        rows = []
        for model_id in model_ids:
            state = states.get(model_id)
            if state is None:
                continue
            stalled = state.stalled(now, self.stall_after_s)
            rate = rates[model_id]
            rows.append(
                ModelActivity(
                    model_id=model_id,
                    queued=dict(state.buffered_by_run).get(run_id, 0),
                    in_flight=dict(state.in_flight_by_run).get(run_id, 0),
                    waiting_on=state.waiting_on,
                    stalled_since=state.idle_since if stalled else None,
                    last_error=state.last_error if state.consecutive_failures else None,
                    last_error_at=state.last_error_at if state.consecutive_failures else None,
                    consecutive_failures=state.consecutive_failures,
                    concurrency_limit=rate.concurrency,
                    concurrency_min=rate.min_concurrency,
                    concurrency_max=rate.max_concurrency,
                    adaptive=rate.adaptive,
                    rate_limit_episodes=rate.episodes,
                    replicas=rate.replicas,
                    replicas_concurrency_limit=rate.replicas_concurrency,
                    replicas_rate_limit_episodes=rate.replicas_episodes,
                )
            )
        return rows

    def _check_failing(self, state: LaneState) -> None:
        """One warning per streak of failed calls (from the third), e.g. a model that
        cannot be reached; an INFO line when a call succeeds again."""
        if state.consecutive_failures >= FAILING_AFTER and state.last_error is not None:
            if state.model_id not in self._failing:
                self._failing.add(state.model_id)
                _log.warning(
                    "model %s: %d consecutive failed calls, latest %s: %s",
                    state.model_id,
                    state.consecutive_failures,
                    state.last_error.reason.value,
                    state.last_error.message,
                )
        elif state.consecutive_failures == 0 and state.model_id in self._failing:
            self._failing.discard(state.model_id)
            _log.info("model %s answers again", state.model_id)

    async def _monitor_lanes(self) -> None:
        every = min(1.0, max(self.stall_after_s / 4, 0.05))
        while True:
            await anyio.sleep(every)
            self.check_stalls(time.time())

    def check_stalls(self, now: float) -> None:
        """Warn about stalled lanes (again every ``stall_after_s`` while they last) and
        snapshot the progress of their runs; say when a stalled lane moves again."""
        self.dispatcher.observe(now)
        for state in self.lane_states():
            self._check_failing(state)
            warned = self._stall_warned.get(state.model_id)
            if state.stalled(now, self.stall_after_s):
                if warned is None or now - warned >= self.stall_after_s:
                    self._stall_warned[state.model_id] = now
                    assert state.idle_since is not None
                    _log.warning(
                        "model %s stalled: ready work and no call in flight for %.0f s "
                        "(buffered %d, waiting on %s, %d consecutive failed calls%s; runs %s)",
                        state.model_id,
                        now - state.idle_since,
                        state.buffered,
                        ", ".join(state.waiting_on) or "nothing",
                        state.consecutive_failures,
                        f", last error {state.last_error.reason.value}: {state.last_error.message}"
                        if state.last_error is not None and state.consecutive_failures
                        else "",
                        ", ".join(state.runs) or "none",
                    )
                    self.progress.force(state.runs)
            elif warned is not None:
                del self._stall_warned[state.model_id]
                _log.info("model %s is no longer stalled", state.model_id)
                self.progress.force(state.runs)

    def _cache_scope(self, spec: RunSpec, tenant: str, model_id: str) -> str | None:
        if not spec.response_cache:
            return None
        return self.cache.settings.scope(tenant, model_id)

    # -- callbacks -----------------------------------------------------------------------

    async def _on_committed(
        self, batch: Sequence[SubtaskOutcome], report: CompletionReport
    ) -> None:
        self.events.publish(report.events)
        self.budgets.committed(batch)
        if self.pages is not None:
            self.pages.committed(batch)  # before the watcher may finish the task
        for observe in self.outcome_observers:
            observe(batch)
        for retry in report.retries:
            self.dispatcher.retry_scheduled(retry.run_id, retry.model_id, retry.next_attempt_at)
        self.progress.touch({retry.run_id for retry in report.retries})
        runs = (self._contexts.run_of(t) for t in report.finished_tasks)
        force = {run_id for run_id in runs if run_id is not None}
        self.progress.completed(report.completed_per_run, force=force)
        for run_id, model_id in report.judge_work:
            if model_id in self._providers:
                self.dispatcher.more_work(run_id, model_id)
            else:  # the judge model was removed from the config (after a restart)
                await self._fail_missing_model(run_id, model_id)
        for task_id in self._code_answers(batch):
            self.code_runs.answered(task_id)
        self.task_scorer.schedule(report.finished_tasks)
        await self.cache.keep(batch, self._contexts)

    def _code_answers(self, batch: Sequence[SubtaskOutcome]) -> set[str]:
        """The code tasks with answers in ``batch``: their programs can run now."""
        tasks = set()
        for outcome in batch:
            if outcome.kind is OutcomeKind.SUCCEEDED and outcome.phase is SubtaskPhase.ANSWER:
                context = self._contexts.get(outcome.task_id)
                if context is not None and context.task_type is TaskType.CODE:
                    tasks.add(outcome.task_id)
        return tasks

    def _on_run_finished(self, run_id: str, state: RunState) -> None:
        _log.info("run %s finished: %s", run_id, state.value)
        self._forget_run(run_id)

    def _run_models(self, run_id: str) -> list[str] | None:
        """The models of a run this engine has loaded; None for a run it does not know."""
        return self._contexts.run_models(run_id)

    def _forget_run(self, run_id: str) -> None:
        self.limiter.remove_run(run_id)
        self.budgets.forget(run_id)
        self.dispatcher.forget_run(run_id)
        self.progress.forget(run_id)
        self._contexts.forget_run(run_id)
        if self.pages is not None:
            self.pages.discard_run(run_id)


def _models_of(task: TaskRow) -> tuple[str, ...]:
    """The models a task calls: its own, and its judge's."""
    return TaskModels.from_json(task.model).model_ids


async def _until_done(fn: Callable[[], Awaitable[None]], done: anyio.Event) -> None:
    try:
        await fn()
    finally:
        done.set()
