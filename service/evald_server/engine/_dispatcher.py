"""The dispatcher: per model, a feeder that claims ready subtasks page by page and a fixed
pool of workers that execute them under the three limits.

A fixed worker pool pulling from a bounded buffer costs ~4 µs and ~25 MB per 100,000
subtasks where a task per subtask costs 120-170 µs and ~600 MB (measured for the
engine issue). The buffer holds at most two pages per model, so a run of any size is
never in memory; a page that reaches the end of one dataset runs on into the next (no
idle gap between datasets). Workers take round-robin across runs. A subtask waiting
for its retry is a row with ``next_attempt_at``, not a sleeping worker.

A call holds, while in flight: a slot of its run's limit (taken without waiting when
the worker picks the subtask), the server-wide ``max_inflight`` and its model's
``max_concurrency``. Each call runs in a cancel scope registered under its run, so
a cancel (or a drain) aborts the HTTP request at once.

Before those slots, a call waits for its model's request and token budgets (and for a
reset the provider's headers announced), on its own model's worker: a model short of
budget holds no server-wide slot that another model could use, and no slot of its
run's limit either. A call that must wait for budget gives back the run slot it took
with its subtask and queues for one again (first come, first served) once its budget
admits it: a run's judge calls use the run's limit while its answering model waits for
budget, so judging overlaps inference. AIMD moves the model limit's capacity
(``_rate_control``).

A run limit spans lanes: a slot freed by one lane wakes every lane that holds work of
that run, and the releasing worker yields before it takes again, so the slot goes to
a lane that was waiting for it rather than back to the lane that freed it.
"""

import dataclasses
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping

import anyio
import anyio.abc
import anyio.lowlevel

from evald_server.domain import OutcomeKind, SubtaskPhase
from evald_server.engine._committer import Committer
from evald_server.engine._contexts import TaskContexts
from evald_server.engine._cost import RunBudgets
from evald_server.engine._executor import (
    TaskContext,
    aborted,
    call_model,
    context_key,
    messages_for,
)
from evald_server.engine._lanes import Lane, LaneState
from evald_server.engine._limits import (
    MODEL_LIMIT,
    RUN_LIMIT,
    SERVER_LIMIT,
    Limit,
    Limiter,
    RunSlot,
)
from evald_server.engine._loglikelihood import calls_for
from evald_server.engine._rate_control import NO_TOKENS, RateControl, Ticket
from evald_server.engine._response_cache import ResponseCache, cache_key, uses_cache
from evald_server.providers import Provider, RateLimitInfo
from evald_server.store import ClaimedSubtask, EventRow, Store, SubtaskOutcome

_log = logging.getLogger(__name__)

PublishEvents = Callable[[Iterable[EventRow]], None]
RATE_BUDGET = "model.rate_budget"  # what a call waiting for RPM/TPM budget waits on
# An idle feeder claims again at least this often: a wake-up that never came costs a
# stall this long, not a wedge (and is counted in ``missed_wakeups`` and logged).
RECHECK_S = 1.0


class Dispatcher:
    def __init__(
        self,
        store: Store,
        limiter: Limiter,
        providers: Mapping[str, Provider],
        committer: Committer,
        contexts: TaskContexts,
        publish: PublishEvents,
        *,
        rng: random.Random | None = None,
        rate: RateControl | None = None,
        budgets: RunBudgets | None = None,
        on_budget_reached: Callable[[str, str], Awaitable[None]] | None = None,
        on_answer: Callable[[ClaimedSubtask, SubtaskOutcome], None] | None = None,
        cache: ResponseCache | None = None,
        clock: Callable[[], float] = time.time,
        recheck_s: float = RECHECK_S,
    ) -> None:
        self._store = store
        self._clock = clock  # wall time, as the store's next_attempt_at is
        self._recheck_s = recheck_s
        self.missed_wakeups = 0  # claims only a periodic re-check found (a lost wake-up)
        self.budgets = budgets or RunBudgets()
        self._on_budget_reached = on_budget_reached
        self._on_answer = on_answer  # sees every succeeded call before its outcome commits
        self._cache = cache
        self.rate = rate or RateControl(limiter, {}, providers)
        self._limiter = limiter
        self._committer = committer
        self._contexts = contexts
        self._publish = publish
        self._rng = rng or random.Random()
        workers_cap = limiter.server.capacity
        self.lanes = {
            model_id: Lane(
                model_id,
                provider,
                limiter.model(model_id),
                min(limiter.model(model_id).max_capacity, workers_cap),
            )
            for model_id, provider in providers.items()
        }
        self._inflight: dict[str, set[anyio.CancelScope]] = {}
        self.calls_by_task: dict[str, int] = {}  # provider calls in flight, per task
        self._cancelled_runs: set[str] = set()
        self._stopping = False
        self._idle = anyio.Event()  # set when stopping and no call is in flight

    # -- control -----------------------------------------------------------------------

    def add_work(self, run_id: str, model_ids: Iterable[str]) -> None:
        """A run has (new) ready work for these models."""
        self._cancelled_runs.discard(run_id)
        for model_id in model_ids:
            self.lanes[model_id].add_work(run_id)

    def more_work(self, run_id: str, model_id: str) -> None:
        """A live run has new ready work for this model (its judge subtasks); a
        cancelled run stays cancelled."""
        lane = self.lanes.get(model_id)
        if lane is not None and run_id not in self._cancelled_runs:
            lane.add_work(run_id)

    def retry_scheduled(self, run_id: str, model_id: str, due: float) -> None:
        lane = self.lanes.get(model_id)
        if lane is not None and run_id not in self._cancelled_runs:
            lane.add_work(run_id, due)

    async def cancel_run(self, run_id: str, *, abort_calls: bool = True) -> None:
        """Abort the run's calls (unless ``abort_calls`` is false: a budget lets the
        calls in flight finish) and cancel its buffered subtasks (after the store has
        cancelled its pending ones, so that nothing new is claimed)."""
        self._cancelled_runs.add(run_id)
        for scope in self._inflight.get(run_id, ()) if abort_calls else ():
            scope.cancel()
        for lane in self.lanes.values():
            lane.forget(run_id)
            lane.items_changed()
            for item in lane.drop(run_id):
                await self._committer.submit(
                    aborted(item, attempted=False, release=False, call_time_s=0.0)
                )

    def forget_run(self, run_id: str) -> None:
        """The run has ended: drop what the dispatcher remembers of it."""
        self._cancelled_runs.discard(run_id)
        for lane in self.lanes.values():
            lane.forget(run_id)

    def stop(self) -> None:
        """Drain, first step: claim and start nothing more; calls in flight go on.

        Buffered subtasks go back to pending when ``run`` returns."""
        self._stopping = True
        for lane in self.lanes.values():
            lane.close()
        if not self._inflight:
            self._idle.set()

    async def wait_idle(self) -> None:
        """After ``stop``: until no call is in flight (their outcomes are submitted)."""
        await self._idle.wait()

    def abort_inflight(self) -> None:
        """Drain, last step: abort the calls still in flight (back to pending, no retry
        spent); their answers, if any come later, are paid for again after a restart."""
        for scopes in self._inflight.values():
            for scope in scopes:
                scope.cancel()

    def lane_states(self) -> list[LaneState]:
        return [lane.state(self._limiter) for lane in self.lanes.values()]

    def observe(self, now: float) -> None:
        for lane in self.lanes.values():
            lane.observe(now, self._limiter)

    # -- running -----------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Feeders and workers until ``stop``; then release what is still buffered."""
        async with anyio.create_task_group() as tg:
            for lane in self.lanes.values():
                tg.start_soon(self._feed, lane, name=f"evald-feeder-{lane.model_id}")
                for _ in range(lane.workers):
                    tg.start_soon(self._work, lane)
            task_status.started()
        for lane in self.lanes.values():
            for item in lane.drop_all():
                await self._committer.submit(
                    aborted(item, attempted=False, release=True, call_time_s=0.0)
                )

    async def _feed(self, lane: Lane) -> None:
        rechecking = False  # this round runs because the re-check's time came, nothing else
        while not self._stopping:
            wake = lane.feeder_wake = anyio.Event()
            claimed, next_due = await self._fill(lane)
            if claimed and rechecking:
                self.missed_wakeups += 1
                _log.warning(
                    "lane %s claimed %d subtask(s) that no wake-up announced (a periodic "
                    "re-check found them)",
                    lane.model_id,
                    claimed,
                )
            rechecking = False
            if claimed or self._stopping:
                continue
            until_due = math.inf if next_due is None else max(0.0, next_due - self._clock())
            with anyio.move_on_after(min(until_due, self._recheck_s)) as idle:
                await wake.wait()
            rechecking = idle.cancelled_caught and until_due > self._recheck_s

    async def _fill(self, lane: Lane) -> tuple[int, float | None]:
        """One claiming round across the lane's runs; returns (claimed, next retry due).

        The water marks count takeable work only: subtasks waiting for their run's
        slots (held by other lanes) leave room to claim other runs' work.

        One ``now`` decides both which runs are claimed and which are waited for: a run
        whose retry falls due between two readings of the clock would be neither (not
        yet due for the claims, no longer waiting after them) and its lane would sleep
        with nothing to wake it."""
        now = self._clock()
        takeable = lane.takeable(self._limiter)
        want = lane.high_water - takeable
        claimed = 0
        # No share of the model's limit here: its work is for the replicas that have one.
        hungry = takeable < lane.low_water and want > 0 and lane.limit.allowed > 0
        ready = lane.claim_round(now) if hungry else []
        if ready:
            share = max(1, math.ceil(want / len(ready)))
            for run_id in ready:
                claimed += await self._claim(lane, run_id, share)
        # After the claims: a claim may just have revealed when a run's retries fall due.
        return claimed, lane.next_retry_due(now)

    async def _claim(self, lane: Lane, run_id: str, share: int) -> int:
        limit = share
        run_limit = self._limiter.run(run_id)
        if run_limit is not None:
            # This replica's share of the run's limit, which may be none (another has it).
            cap = 2 * min(run_limit.allowed, lane.workers)
            limit = min(limit, cap - lane.buffered_for(run_id))
        entry = lane.runs.get(run_id)
        if limit <= 0 or entry is None:
            return 0
        version = entry.version
        claim = await self._store.claim_ready(run_id, lane.model_id, limit, self._clock())
        self._publish(claim.events)
        if claim.subtasks:
            await self._accept(lane, run_id, claim.subtasks)
        entry = lane.runs.get(run_id)
        if entry is not None and entry.version == version:  # else: new work came meanwhile
            if claim.exhausted and claim.next_retry_at is None:
                lane.forget(run_id)
            elif claim.exhausted:
                entry.next_retry_at = claim.next_retry_at
        return len(claim.subtasks)

    async def _accept(self, lane: Lane, run_id: str, items: tuple[ClaimedSubtask, ...]) -> None:
        if run_id in self._cancelled_runs or self._stopping:
            release = run_id not in self._cancelled_runs
            for item in items:
                await self._committer.submit(
                    aborted(item, attempted=False, release=release, call_time_s=0.0)
                )
            return
        if self._cache is not None:
            # Answers the cache holds succeed here: never buffered, so they take no slot
            # of any limit and no rate budget, and never reach the provider.
            hits, rest = await self._cache.answer(items, self._contexts, self._clock())
            for outcome in hits:
                await self._committer.submit(outcome)
            items = tuple(rest)
            if not items:
                return
        lane.add(run_id, items)

    async def _work(self, lane: Lane) -> None:
        while True:
            picked = await lane.take(self._limiter)
            if picked is None:
                return
            item, run_limit = picked
            outcome = await self._attempt(lane, item, RunSlot(run_limit))
            reason = self.budgets.charge(outcome)
            if reason is not None:
                self.stop_run(item.run_id)
            if (
                self._on_answer is not None
                and outcome.kind is OutcomeKind.SUCCEEDED
                and item.phase is SubtaskPhase.ANSWER
            ):
                self._on_answer(item, outcome)
            await self._committer.submit(outcome)
            if reason is not None and self._on_budget_reached is not None:
                await self._on_budget_reached(item.run_id, reason)
            if run_limit is not None:
                # Let a lane woken for the freed slot take it before this one does.
                await anyio.lowlevel.checkpoint()

    async def give_back_unstartable(self) -> None:
        """After a balancing: buffered work this replica may not start (its share of the
        model's or the run's limit is none) goes back to pending, for a replica that
        may start it (the store tells the others); none is claimed here meanwhile."""
        for lane in self.lanes.values():
            runs = [r for r in list(lane.buffers) if not lane.may_start(self._limiter, r)]
            for run_id in runs:
                for item in lane.drop(run_id):
                    await self._committer.submit(
                        aborted(item, attempted=False, release=True, call_time_s=0.0)
                    )

    def stop_run(self, run_id: str) -> None:
        """No other call of the run starts (its budget is reached), from now on."""
        self._cancelled_runs.add(run_id)

    def run_slots_changed(self, run_id: str) -> None:
        """The run's limit changed (its share of a global limit): lanes take again, and
        feeders that left the run's work to other replicas (no share here) claim again."""
        self._run_slot_freed(run_id)
        for lane in self.lanes.values():
            if run_id in lane.runs:
                lane.wake_feeder()

    def model_share_changed(self, model_id: str) -> None:
        """This replica's share of the model's limit changed: its feeder, which claims
        nothing while the share is none, looks again."""
        lane = self.lanes.get(model_id)
        if lane is not None:
            lane.wake_feeder()

    def _run_slot_freed(self, run_id: str) -> None:
        """Wake every lane holding work of the run (and the feeders: takeable work grew)."""
        for lane in self.lanes.values():
            if lane.buffered_for(run_id):
                lane.items_changed()
                if lane.takeable(self._limiter) < lane.low_water:
                    lane.wake_feeder()

    async def _acquire(self, lane: Lane, limit: Limit, name: str) -> None:
        if limit.try_acquire():
            return
        lane.waiting[name] += 1
        try:
            await limit.acquire()
        finally:
            lane.waiting[name] -= 1

    async def _admit(
        self, lane: Lane, item: ClaimedSubtask, ctx: TaskContext, run_slot: RunSlot
    ) -> Ticket:
        """Wait for the model's request and token budgets with no slot held meanwhile:
        a call that must wait gives its run's slot back first (``_attempt_holding``
        takes it again once the budget admits the call), so that the run's calls on
        other models (its judge's) use the run's limit while this model waits."""
        control = self.rate.model(lane.model_id)
        estimate = NO_TOKENS
        # A loglikelihood sample makes a call per choice: each is a request of the budget.
        calls = 1 if ctx.continuation is None else calls_for(item.fields)
        if control.counts_tokens:
            messages = messages_for(item, ctx)
            chars = sum(len(message.content) for message in messages)
            max_tokens = ctx.params.max_tokens
            estimate = control.estimate(
                chars * calls, None if max_tokens is None else max_tokens * calls
            )
        if control.admits_now(estimate, calls):
            return await control.admit(estimate, calls)  # goes at once, run slot and all
        if run_slot.give_back():
            self._run_slot_freed(item.run_id)
        lane.waiting[RATE_BUDGET] += 1
        try:
            return await control.admit(estimate, calls)
        finally:
            lane.waiting[RATE_BUDGET] -= 1

    async def _call(
        self,
        lane: Lane,
        item: ClaimedSubtask,
        ctx: TaskContext,
        on_rate_limits: Callable[[RateLimitInfo], None],
    ) -> SubtaskOutcome:
        """The provider call itself, counted as in flight for progress and stall checks."""
        lane.call_started(item.run_id)
        self.calls_by_task[item.task_id] = self.calls_by_task.get(item.task_id, 0) + 1
        outcome: SubtaskOutcome | None = None
        try:
            outcome = await call_model(
                item,
                ctx,
                lane.provider,
                self._rng,
                reference=lane.needs_reference,
                on_rate_limits=on_rate_limits,
            )
            return outcome
        finally:
            lane.call_ended(item.run_id, outcome, self._clock())
            left = self.calls_by_task[item.task_id] - 1
            if left:
                self.calls_by_task[item.task_id] = left
            else:
                del self.calls_by_task[item.task_id]

    async def _attempt(self, lane: Lane, item: ClaimedSubtask, run_slot: RunSlot) -> SubtaskOutcome:
        """One attempt of ``item``; the run's slot (``run_slot``, taken with the item) is
        given back by the time it returns."""
        try:
            return await self._attempt_holding(lane, item, run_slot)
        finally:
            if run_slot.give_back():
                self._run_slot_freed(item.run_id)

    async def _attempt_holding(
        self, lane: Lane, item: ClaimedSubtask, run_slot: RunSlot
    ) -> SubtaskOutcome:
        ctx = self._contexts[context_key(item.task_id, item.phase)]
        if item.run_id in self._cancelled_runs or self._stopping:
            release = item.run_id not in self._cancelled_runs
            return aborted(item, attempted=False, release=release, call_time_s=0.0)
        scope = anyio.CancelScope()
        scopes = self._inflight.setdefault(item.run_id, set())
        scopes.add(scope)
        attempted = False
        started = time.perf_counter()
        try:
            with scope:
                ticket = await self._admit(lane, item, ctx, run_slot)
                control = self.rate.model(lane.model_id)
                headers: list[RateLimitInfo] = []
                outcome: SubtaskOutcome | None = None
                try:
                    if run_slot.limit is not None and not run_slot.held:
                        await self._acquire(lane, run_slot.limit, RUN_LIMIT)
                        run_slot.held = True
                    await self._acquire(lane, self._limiter.server, SERVER_LIMIT)
                    try:
                        await self._acquire(lane, lane.limit, MODEL_LIMIT)
                        try:
                            if item.run_id in self._cancelled_runs:
                                # Stopped while it waited for its slots (a budget).
                                return aborted(
                                    item, attempted=False, release=False, call_time_s=0.0
                                )
                            attempted = True
                            control.sending(ticket)
                            outcome = await self._call(lane, item, ctx, headers.append)
                            if outcome.rate_limited:  # decrease now, then hold the slot
                                control.finished(ticket, outcome, headers[-1] if headers else None)
                                await control.hold_rate_limited(ticket)
                            if self._cache is not None and uses_cache(ctx):
                                key = cache_key(self._cache.settings, item, ctx)
                                return dataclasses.replace(outcome, cache_key=key)
                            return outcome
                        finally:
                            # Before the slot is freed: a 429's decrease must apply
                            # before the slot can go to a waiting call.
                            control.finished(ticket, outcome, headers[-1] if headers else None)
                            lane.limit.release()
                    finally:
                        self._limiter.server.release()
                finally:
                    control.finished(ticket, outcome, headers[-1] if headers else None)
            release = item.run_id not in self._cancelled_runs
            return aborted(
                item,
                attempted=attempted,
                release=release,
                call_time_s=time.perf_counter() - started,
            )
        finally:
            scopes.discard(scope)
            if not scopes:
                self._inflight.pop(item.run_id, None)
            if self._stopping and not self._inflight:
                self._idle.set()
