"""Shared helpers for engine tests: configs, datasets, an in-process scorer, waiting."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from evald_server.app import DatasetHeader, Evald, RetryPolicy, Run, RunEvent
from evald_server.config import ModelConfig, ServerConfig, parse_config
from evald_server.domain import TaskType
from evald_server.scoring import (
    SampleSource,
    ScoreReport,
    ScoringSample,
    read_samples,
    score_task,
)
from tests._shared import classification_jsonl
from tests.harness import config_data

TENANT = "tenant-a"


def make_config(
    tmp_path: Path,
    models: Sequence[dict[str, Any] | ModelConfig],
    *,
    engine: dict[str, Any] | None = None,
    **limits: Any,
) -> ServerConfig:
    """An in-process server's config: the server section at its defaults (10 s grace)."""
    tables = [m.model_dump() if isinstance(m, ModelConfig) else m for m in models]
    return parse_config(
        config_data(tmp_path, models=tables, limits=limits, server={}, engine=engine)
    )


FAST_RETRIES = RetryPolicy(max_retries=3, backoff_s=(0.05,), jitter=0.0)


async def upload(app: Evald, name: str, records: int, *, tenant: str = TENANT) -> None:
    header = DatasetHeader(name=name, benchmark_version="1.0.0", task_type=TaskType.CLASSIFICATION)
    await app.datasets.upload(tenant, header, [classification_jsonl(records)])


class InlineScoring:
    """Scores in a thread of this process: fast to start, same scorers as the pool."""

    def __init__(self, *, fail: bool = False, gate: anyio.Event | None = None) -> None:
        self.calls: list[int] = []  # samples per scored task
        self._fail = fail
        self._gate = gate

    async def score(
        self, task_type: TaskType, samples: SampleSource, *, seed: int, timeout_s: float
    ) -> ScoreReport:
        return await self.score_samples(task_type, await read_samples(samples), seed=seed)

    async def score_samples(
        self, task_type: TaskType, samples: Sequence[ScoringSample], *, seed: int
    ) -> ScoreReport:
        from evald_server.domain import ErrorReason
        from evald_server.scoring import ScoringFailure

        self.calls.append(len(samples))
        if self._gate is not None:
            await self._gate.wait()
        if self._fail:
            raise ScoringFailure(ErrorReason.SCORER_FAILED, "scorer exploded", scorer="test@0")
        return await anyio.to_thread.run_sync(
            lambda: score_task(task_type, samples, seed=seed, resamples=50)
        )


async def wait_until_finished(
    app: Evald, run_id: str, *, tenant: str = TENANT, timeout_s: float = 60
) -> list[RunEvent]:
    """Watch the run to its terminal event; the events seen."""
    seen: list[RunEvent] = []
    with anyio.fail_after(timeout_s):
        async for event in await app.runs.watch(tenant, run_id, 0):
            seen.append(event)
    return seen


async def final_run(app: Evald, run_id: str, *, tenant: str = TENANT) -> Run:
    await wait_until_finished(app, run_id, tenant=tenant)
    return await app.runs.get(tenant, run_id)
