"""A model's and a run's ``max_concurrency`` are global: each process uses only its
share of them.

Once a second (``BALANCE_EVERY_S``) the engine tells the store how many slots of each
shared limit it may be using (``Limit.held``: its allowed slots, or more while calls
from before a cut are still in flight) and gets its share back
(``Store.capacity_shares``), which caps the limit (``Limit.set_ceiling``). No model call
waits on the database: the share is a number in memory between two balancings. On
SQLite the share is the whole limit, always.

The same balancing shares each model's ``requests_per_minute`` and ``tokens_per_minute``
(declared, or learned from the provider's headers): each replica's budget refills at its
share of the rate, weighted by the demand it states (the calls or tokens it charged
since its last balancing, plus those waiting for budget now), and it publishes the
rate its budget refills at until the new share is in force. It also publishes each
model's concurrency and rate-limit episodes, so that every replica's statistics show
the model's figures summed over the live replicas (``RateStats.replicas_*``).
"""

import logging
from collections.abc import Awaitable, Callable

import anyio

from evald_server.engine._limits import Limit, Limiter
from evald_server.engine._rate_control import RateControl
from evald_server.store import SharedRate, Shares, Store, StoreError

_log = logging.getLogger(__name__)
BALANCE_EVERY_S = 1.0
RUN_KEY = "@run:"  # a run's limit among the shared ones ("@" starts no model id)
REQUESTS_KEY = "@rpm:"  # a model's requests a minute among the shared rates
TOKENS_KEY = "@tpm:"  # and its tokens a minute
CONCURRENCY_KEY = "@concurrency:"  # a model's concurrency among the published figures
EPISODES_KEY = "@episodes:"  # and its rate-limit episodes


class CapacityShares:
    def __init__(
        self,
        store: Store,
        limiter: Limiter,
        models: list[str],
        run_share_changed: Callable[[str], None],
        rate: RateControl | None = None,
        balanced: Callable[[Shares], Awaitable[None]] | None = None,
        model_share_changed: Callable[[str], None] | None = None,
    ) -> None:
        self._store = store
        self._limiter = limiter
        self._models = models
        self._rate = rate
        self._balanced = balanced  # called after each balancing (budgets look again)
        # A run's slots are taken without waiting on its limit (the lanes' take), so a
        # share that grew must wake the lanes holding its work; a model's waiters are
        # admitted by the limit itself.
        self._run_share_changed = run_share_changed
        # A feeder claims nothing while its model's share is none: one that grew wakes it.
        self._model_share_changed = model_share_changed
        self.balanced = 0

    async def balance_once(self) -> None:
        shared: dict[str, Limit] = {m: self._limiter.model(m) for m in self._models}
        shared |= {f"{RUN_KEY}{r}": limit for r, limit in self._limiter.run_limits().items()}
        limits = {key: limit.max_capacity for key, limit in shared.items()}
        held = {key: limit.held for key, limit in shared.items()}
        rates, published = self._rates()
        balance = await self._store.capacity_shares(limits, held, rates, published)
        self._apply_rates(balance)
        for key, share in balance.slots.items():
            limit = shared[key]
            ceiling = None if share >= limits[key] else share
            if ceiling != limit.ceiling:
                _log.info("%s: this replica's share is %s of %d", key, share, limits[key])
                limit.set_ceiling(ceiling)
                if key.startswith(RUN_KEY):
                    self._run_share_changed(key.removeprefix(RUN_KEY))
                elif self._model_share_changed is not None:
                    self._model_share_changed(key)
        self.balanced += 1
        if self._balanced is not None:
            await self._balanced(balance)

    def _rates(self) -> tuple[dict[str, SharedRate], dict[str, float]]:
        """Each model's budgets as this replica states them, and its published figures.
        Before its first balancing a replica has admitted no call: it holds no rate."""
        rates: dict[str, SharedRate] = {}
        published: dict[str, float] = {}
        if self._rate is None:
            return rates, published
        for model_id, control in self._rate.models.items():
            for prefix, budget in ((REQUESTS_KEY, control.requests), (TOKENS_KEY, control.tokens)):
                if budget is not None:
                    held = budget.share if self.balanced else 0.0
                    rates[prefix + model_id] = SharedRate(budget.stated, held, budget.demand())
            published[CONCURRENCY_KEY + model_id] = control.concurrency
            published[EPISODES_KEY + model_id] = control.episodes
        return rates, published

    def _apply_rates(self, balance: Shares) -> None:
        if self._rate is None:
            return
        for model_id, control in self._rate.models.items():
            requests = balance.rates.get(REQUESTS_KEY + model_id)
            tokens = balance.rates.get(TOKENS_KEY + model_id)
            if requests is not None or tokens is not None:
                control.set_shares(requests, tokens)
            control.shared = balance.replicas > 1
            control.peers_published(
                balance.replicas,
                int(balance.peers.get(CONCURRENCY_KEY + model_id, 0)),
                int(balance.peers.get(EPISODES_KEY + model_id, 0)),
            )

    async def run(self) -> None:
        while True:
            await anyio.sleep(BALANCE_EVERY_S)
            try:
                await self.balance_once()
            except StoreError as exc:  # the database away for long: keep the last shares
                _log.warning("could not balance the shared limits: %s", exc)
