"""``Evald``: the composition root. It opens the store, builds one provider per
configured model, the scoring pool, the engine and the application services, starts
them and drains them; it forwards no request — callers use its services directly
(``runs``, ``datasets``, ``comparisons``, ``models``).

Started as an anyio service — ``await tg.start(app.serve)`` or
``async with Evald.open(config) as app`` — it resumes unfinished work and reports
readiness. ``drain()`` stops it gracefully: no new claims, in-flight calls aborted and
returned to pending without spending a retry, every outcome written, then everything
closed.
"""

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, Self, TypeVar

import anyio
import anyio.abc

from evald_server.app._comparisons import ComparisonService
from evald_server.app._datasets import DatasetService
from evald_server.app._runs import RunService
from evald_server.app._types import ModelInfo
from evald_server.config import ServerConfig
from evald_server.engine import Engine, ScoringPort
from evald_server.providers import Provider, build_provider
from evald_server.scoring import ScoringPool
from evald_server.store import Store, open_store

_T = TypeVar("_T")


def _started(part: _T | None) -> _T:
    if part is None:
        raise RuntimeError("evald is not started")
    return part


class Evald:
    """The evaluation service, in process. ``store``, ``scoring`` and ``providers`` may be
    injected (tests); by default they are built from ``config``."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        store: Store | None = None,
        scoring: ScoringPort | None = None,
        providers: Mapping[str, Provider] | None = None,
    ) -> None:
        self.config = config
        self._injected_store = store
        self._injected_scoring = scoring
        self._injected_providers = providers
        self._engine: Engine | None = None
        self._datasets: DatasetService | None = None
        self._runs: RunService | None = None
        self._comparisons: ComparisonService | None = None
        # The registry as clients see it (no secrets), in the config's order.
        self.models: tuple[ModelInfo, ...] = tuple(ModelInfo.of(m) for m in config.models)

    @classmethod
    @asynccontextmanager
    async def open(cls, config: ServerConfig, **options: Any) -> AsyncIterator[Self]:
        """Serve for the duration of the block; drain on the way out."""
        app = cls(config, **options)
        async with anyio.create_task_group() as tg:
            await tg.start(app.serve)
            try:
                yield app
            finally:
                with anyio.CancelScope(shield=True):
                    await app.drain()

    async def serve(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        store = self._injected_store or await _open_store(self.config)
        providers: dict[str, Provider] = dict(self._injected_providers or {})
        pool: ScoringPool | None = None
        try:
            if self._injected_providers is None:
                for model in self.config.models:
                    pool_size = min(model.max_concurrency, self.config.limits.max_inflight)
                    providers[model.id] = build_provider(model, pool_size=pool_size)
            tuning = self.config.engine
            scoring = self._injected_scoring
            if scoring is None:
                scoring = pool = ScoringPool(tuning.scoring_workers)
            engine = Engine(store, providers, scoring, self.config)
            self._engine = engine
            self._datasets = DatasetService(
                store, self.config.limits, max_upload_bytes=tuning.max_upload_bytes
            )
            self._runs = RunService(self.config, store, engine)
            self._comparisons = ComparisonService(store)
            async with anyio.create_task_group() as tg:
                await tg.start(engine.run)
                task_status.started()
        finally:
            with anyio.CancelScope(shield=True):
                if self._injected_providers is None:
                    for provider in providers.values():
                        await provider.aclose()
                if pool is not None:
                    await anyio.to_thread.run_sync(pool.close)
                if self._injected_store is None:
                    await store.close()

    async def drain(self) -> None:
        """Stop claiming; let calls in flight finish within ``server.grace_s``, abort the
        rest (back to pending); write; stop."""
        if self._engine is not None:
            await self._engine.drain(self.config.server.grace_s)

    @property
    def draining(self) -> bool:
        return self._engine is not None and self._engine.draining

    @property
    def engine(self) -> Engine:
        return _started(self._engine)

    @property
    def store(self) -> Store:
        return self.engine.store

    @property
    def runs(self) -> RunService:
        """Create, read, list, cancel, retry and watch runs; their results and samples."""
        return _started(self._runs)

    @property
    def datasets(self) -> DatasetService:
        """Upload, get and list dataset versions."""
        return _started(self._datasets)

    @property
    def comparisons(self) -> ComparisonService:
        """Paired comparisons of two finished runs."""
        return _started(self._comparisons)


async def _open_store(config: ServerConfig) -> Store:
    return await open_store(
        config.store.url,
        events_retained_per_run=config.limits.events_retained_per_run,
        **config.store.replica_options(),
    )
