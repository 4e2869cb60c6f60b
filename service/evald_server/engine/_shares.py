"""A model's and a run's ``max_concurrency`` are global: each process uses only its
share of them.

Once a second (``BALANCE_EVERY_S``) the engine tells the store how many slots of each
shared limit it may be using (``Limit.held``: its allowed slots, or more while calls
from before a cut are still in flight) and gets its share back
(``Store.capacity_shares``), which caps the limit (``Limit.set_ceiling``). No model call
waits on the database: the share is a number in memory between two balancings. On
SQLite the share is the whole limit, always.
"""

import logging
from collections.abc import Callable

import anyio

from evald_server.engine._limits import Limit, Limiter
from evald_server.store import Store, StoreError

_log = logging.getLogger(__name__)
BALANCE_EVERY_S = 1.0
RUN_KEY = "@run:"  # a run's limit among the shared ones ("@" starts no model id)


class CapacityShares:
    def __init__(
        self,
        store: Store,
        limiter: Limiter,
        models: list[str],
        run_share_changed: Callable[[str], None],
    ) -> None:
        self._store = store
        self._limiter = limiter
        self._models = models
        # A run's slots are taken without waiting on its limit (the lanes' take), so a
        # share that grew must wake the lanes holding its work; a model's waiters are
        # admitted by the limit itself.
        self._run_share_changed = run_share_changed
        self.balanced = 0

    async def balance_once(self) -> None:
        shared: dict[str, Limit] = {m: self._limiter.model(m) for m in self._models}
        shared |= {f"{RUN_KEY}{r}": limit for r, limit in self._limiter.run_limits().items()}
        limits = {key: limit.max_capacity for key, limit in shared.items()}
        held = {key: limit.held for key, limit in shared.items()}
        shares = await self._store.capacity_shares(limits, held)
        for key, share in shares.items():
            limit = shared[key]
            ceiling = None if share >= limits[key] else share
            if ceiling != limit.ceiling:
                _log.info("%s: this replica's share is %s of %d", key, share, limits[key])
                limit.set_ceiling(ceiling)
                if key.startswith(RUN_KEY):
                    self._run_share_changed(key.removeprefix(RUN_KEY))
        self.balanced += 1

    async def run(self) -> None:
        while True:
            await anyio.sleep(BALANCE_EVERY_S)
            try:
                await self.balance_once()
            except StoreError as exc:  # the database away for long: keep the last shares
                _log.warning("could not balance the shared limits: %s", exc)
