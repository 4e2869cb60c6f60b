"""Acting on what other processes changed in a shared store (``Store.changes``).

On PostgreSQL several replicas share the work; each one learns from the store's change
feed that a run was created, retried or had work given back elsewhere (dispatch it
here too), cancelled elsewhere (abort its calls in flight here), finished elsewhere
(forget it), that a run's event log grew (wake its watchers here), or that a task's
scoring job is free (try to take it). On SQLite the feed is silent. The engine does not
know which store it has: it only follows the feed.
"""

import logging
from collections.abc import Awaitable, Callable, Iterable

from evald_server.engine._dispatcher import Dispatcher
from evald_server.engine._events import EventHub
from evald_server.engine._task_scoring import TaskScorer
from evald_server.store import CALLS_FINISH, ChangeKind, Store, StoreChange

_log = logging.getLogger(__name__)


class StoreChanges:
    def __init__(
        self,
        store: Store,
        *,
        register_run: Callable[[str], Awaitable[None]],
        run_models: Callable[[str], Iterable[str] | None],
        forget_run: Callable[[str], None],
        dispatcher: Dispatcher,
        events: EventHub,
        task_scorer: TaskScorer,
    ) -> None:
        self._store = store
        self._register_run = register_run
        self._run_models = run_models
        self._forget_run = forget_run
        self._dispatcher = dispatcher
        self._events = events
        self._task_scorer = task_scorer
        self.applied = 0

    async def run(self) -> None:
        async for change in self._store.changes():
            try:
                await self.apply(change)
            except Exception:  # one bad change must not stop the feed (a bug: logged)
                _log.exception("could not apply the store change %s", change)
            self.applied += 1

    async def apply(self, change: StoreChange) -> None:
        kind, run_id = change.kind, change.run_id
        if kind is ChangeKind.EVENTS:
            self._events.poke(run_id, int(change.detail))
        elif kind is ChangeKind.WORK:
            models = self._run_models(run_id)
            if models is None:
                await self._register_run(run_id)  # new here: load it, then dispatch
            else:
                self._dispatcher.add_work(run_id, models)
        elif kind is ChangeKind.CANCEL:
            if self._run_models(run_id) is not None:
                # A budget's cancel lets the calls in flight finish, everywhere.
                abort = change.detail != CALLS_FINISH
                await self._dispatcher.cancel_run(run_id, abort_calls=abort)
        elif kind is ChangeKind.FINISHED:
            if self._run_models(run_id) is not None:
                self._forget_run(run_id)
        elif kind is ChangeKind.SCORING:
            self._task_scorer.schedule([change.detail])
        elif kind is ChangeKind.RESYNC:
            for live in await self._store.live_run_ids():
                models = self._run_models(live)
                if models is None:
                    await self._register_run(live)
                else:
                    self._dispatcher.add_work(live, models)
            self._events.poke_all()
            self._task_scorer.schedule(await self._store.scoring_task_ids())
