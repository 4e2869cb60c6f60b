"""``Evald``: the application facade the gRPC servicer calls. Domain objects in and out,
tenant-scoped, no proto.

Started as an anyio service — ``await tg.start(app.serve)`` or
``async with Evald.open(config) as app`` — it opens the store, builds one provider per
configured model and the scoring pool, resumes unfinished work, and reports readiness.
``drain()`` stops it gracefully: no new claims, in-flight calls aborted and returned to
pending without spending a retry, every outcome written, then everything closed.
"""

import logging
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Self

import anyio
import anyio.abc

from evald_server.app._comparisons import ComparisonService
from evald_server.app._datasets import DatasetService
from evald_server.app._runs import RunService
from evald_server.app._types import Dataset, DatasetHeader, ModelInfo, Page, Run, Sample
from evald_server.comparison import ModelPair, RunComparison
from evald_server.config import ServerConfig
from evald_server.domain import ErrorCategory, ErrorReason, RunState, SubtaskState, TaskType
from evald_server.engine import (
    DatasetRef,
    Engine,
    LimitStats,
    RateSettings,
    RateStats,
    RunEvent,
    RunSpec,
    ScoringPort,
    TaskEvaluation,
)
from evald_server.providers import Provider, build_provider
from evald_server.scoring import ScoringPool
from evald_server.store import StateCounts, Store, open_store

_log = logging.getLogger(__name__)


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
        heartbeat_s: float = 5.0,
        engine_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.config = config
        self._injected_store = store
        self._injected_scoring = scoring
        self._injected_providers = providers
        self._heartbeat_s = heartbeat_s
        self._engine_options = dict(engine_options or {})
        self._engine: Engine | None = None
        self._datasets: DatasetService | None = None
        self._runs: RunService | None = None
        self._comparisons: ComparisonService | None = None
        self._models = [ModelInfo.of(m) for m in config.models]

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
            scoring = self._injected_scoring
            if scoring is None:
                scoring = pool = ScoringPool()
            engine = Engine(
                store,
                providers,
                {m.id: m.max_concurrency for m in self.config.models},
                scoring,
                max_inflight=self.config.limits.max_inflight,
                heartbeat_s=self._heartbeat_s,
                rate_settings={m.id: RateSettings.of(m) for m in self.config.models},
                **{"stall_after_s": self.config.server.stall_warning_s, **self._engine_options},
            )
            self._engine = engine
            self._datasets = DatasetService(store, self.config.limits)
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
        if self._engine is None:
            raise RuntimeError("evald is not started")
        return self._engine

    @property
    def _dataset_service(self) -> DatasetService:
        if self._datasets is None:
            raise RuntimeError("evald is not started")
        return self._datasets

    @property
    def _run_service(self) -> RunService:
        if self._runs is None:
            raise RuntimeError("evald is not started")
        return self._runs

    # -- models and datasets -------------------------------------------------------------

    def list_models(self) -> list[ModelInfo]:
        return list(self._models)

    async def upload_dataset(
        self, tenant: str, header: DatasetHeader, chunks: AsyncIterable[bytes] | Iterable[bytes]
    ) -> tuple[Dataset, bool]:
        return await self._dataset_service.upload(tenant, header, chunks)

    async def get_dataset(
        self, tenant: str, *, dataset_id: str | None = None, ref: DatasetRef | None = None
    ) -> Dataset:
        return await self._dataset_service.get(tenant, dataset_id, ref)

    async def list_datasets(
        self,
        tenant: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        name: str | None = None,
        task_type: TaskType | None = None,
    ) -> Page[Dataset]:
        return await self._dataset_service.list(
            tenant, size=page_size, token=page_token, name=name, task_type=task_type
        )

    # -- runs ----------------------------------------------------------------------------

    async def create_run(self, tenant: str, spec: RunSpec, request_id: str | None = None) -> Run:
        run, _created = await self._run_service.create(tenant, spec, request_id or None)
        return run

    async def get_run(self, tenant: str, run_id: str) -> Run:
        return await self._run_service.get(tenant, run_id)

    async def list_runs(
        self,
        tenant: str,
        *,
        page_size: int = 0,
        page_token: str = "",
        states: Sequence[RunState] = (),
    ) -> Page[Run]:
        return await self._run_service.list(tenant, size=page_size, token=page_token, states=states)

    async def cancel_run(self, tenant: str, run_id: str) -> Run:
        return await self._run_service.cancel(tenant, run_id)

    async def retry_run(
        self,
        tenant: str,
        run_id: str,
        *,
        task_ids: Sequence[str] = (),
        categories: Sequence[ErrorCategory] = (),
        reasons: Sequence[ErrorReason] = (),
        states: Sequence[SubtaskState] = (),
    ) -> tuple[Run, int]:
        return await self._run_service.retry(
            tenant, run_id, task_ids, categories, reasons=reasons, states=states
        )

    async def watch(self, tenant: str, run_id: str, after_seq: int = 0) -> AsyncIterator[RunEvent]:
        """Validates now (NOT_FOUND, OUT_OF_RANGE raise here); then iterate the events."""
        return await self._run_service.watch(tenant, run_id, after_seq)

    async def list_results(
        self,
        tenant: str,
        run_id: str,
        *,
        task_ids: Sequence[str] = (),
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[TaskEvaluation]:
        return await self._run_service.results(
            tenant, run_id, task_ids=task_ids, size=page_size, token=page_token
        )

    async def list_samples(
        self,
        tenant: str,
        run_id: str,
        *,
        task_id: str | None = None,
        states: Sequence[SubtaskState] = (),
        page_size: int = 0,
        page_token: str = "",
    ) -> Page[Sample]:
        return await self._run_service.samples(
            tenant, run_id, task_id=task_id, states=states, size=page_size, token=page_token
        )

    async def compare_runs(
        self,
        tenant: str,
        baseline_run_id: str,
        candidate_run_id: str,
        *,
        model_pairs: Sequence[ModelPair] = (),
        resamples: int = 0,
        permutations: int = 0,
        seed: int = 0,
    ) -> RunComparison:
        if self._comparisons is None:
            raise RuntimeError("evald is not started")
        return await self._comparisons.compare(
            tenant,
            baseline_run_id,
            candidate_run_id,
            model_pairs=model_pairs,
            resamples=resamples,
            permutations=permutations,
            seed=seed,
        )

    async def state_counts(self) -> StateCounts:
        """Runs, tasks and subtasks by state, over every tenant (for the metrics)."""
        return await self.engine.store.state_counts()

    def limiter_stats(self) -> list[LimitStats]:
        return self.engine.limiter_stats()

    def rate_stats(self) -> list[RateStats]:
        """Each model's rate control: AIMD value and bounds, episodes, budget waits."""
        return self.engine.rate_stats()


async def _open_store(config: ServerConfig) -> Store:
    return await open_store(
        config.store.url,
        events_retained_per_run=config.limits.events_retained_per_run,
        **config.store.replica_options(),
    )
