"""A model's ``max_concurrency`` is global: each process uses only its share of it.

Once a second (``BALANCE_EVERY_S``) the engine tells the store how many slots of each
model it may be using (``Limit.held``: its allowed slots, or more while calls from
before a cut are still in flight) and gets its share back (``Store.capacity_shares``),
which caps the model's limit (``Limit.set_ceiling``). No model call waits on the
database: the share is a number in memory between two balancings. On SQLite the share
is the whole limit, always.
"""

import logging

import anyio

from evald_server.engine._limits import Limiter
from evald_server.store import Store, StoreError

_log = logging.getLogger(__name__)
BALANCE_EVERY_S = 1.0


class CapacityShares:
    def __init__(self, store: Store, limiter: Limiter, models: list[str]) -> None:
        self._store = store
        self._limiter = limiter
        self._models = models
        self.balanced = 0

    async def balance_once(self) -> None:
        limits = {m: self._limiter.model(m).max_capacity for m in self._models}
        held = {m: self._limiter.model(m).held for m in self._models}
        shares = await self._store.capacity_shares(limits, held)
        for model_id, share in shares.items():
            limit = self._limiter.model(model_id)
            ceiling = None if share >= limits[model_id] else share
            if ceiling != limit.ceiling:
                _log.info(
                    "model %s: this replica's share is %s of %d", model_id, share, limits[model_id]
                )
                limit.set_ceiling(ceiling)
        self.balanced += 1

    async def run(self) -> None:
        while True:
            await anyio.sleep(BALANCE_EVERY_S)
            try:
                await self.balance_once()
            except StoreError as exc:  # the database away for long: keep the last shares
                _log.warning("could not balance the model shares: %s", exc)
