"""The application services through the composition root: datasets, validation, tenants,
pages, drain."""

import sqlite3
from pathlib import Path

import anyio
import pytest

from evald_server.app import DatasetHeader, DatasetRef, Evald, RunSpec
from evald_server.config import ServerConfig
from evald_server.domain import (
    AlreadyExists,
    DatasetInvalid,
    ErrorReason,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    RunState,
    TaskType,
)
from evald_server.fake_provider import FakeConfig, FakeProvider
from tests._shared import classification_jsonl, simulated_model
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished

HEADER = DatasetHeader(name="sst", benchmark_version="1.0.0", task_type=TaskType.CLASSIFICATION)


@pytest.mark.anyio
async def test_the_upload_cap_comes_from_the_engine_section(tmp_path: Path) -> None:
    data = classification_jsonl(60)
    cap = len(data) - 1
    config = make_config(tmp_path, [simulated_model("sim")], engine={"max_upload_bytes": cap})
    async with Evald.open(config, scoring=InlineScoring()) as app:
        with pytest.raises(ResourceExhausted) as refused:
            await app.datasets.upload(TENANT, HEADER, [data[:100], data[100:]])
        assert refused.value.reason is ErrorReason.DATASET_TOO_LARGE
        assert refused.value.metadata["limitValue"] == str(cap)
        assert "engine.max_upload_bytes" in refused.value.message
        assert (await app.datasets.list(TENANT)).items == ()  # nothing stored
        dataset, _ = await app.datasets.upload(TENANT, HEADER, [classification_jsonl(59)])
        assert dataset.record_count == 59


@pytest.mark.anyio
async def test_dataset_versions_are_immutable_and_uploads_idempotent(tmp_path: Path) -> None:
    async with Evald.open(
        make_config(tmp_path, [simulated_model("sim")]), scoring=InlineScoring()
    ) as app:
        first, created = await app.datasets.upload(TENANT, HEADER, [classification_jsonl(4)])
        assert created
        assert (first.record_count, first.size_bytes) == (4, len(classification_jsonl(4)))
        # Same content in other chunks: the same dataset.
        data = classification_jsonl(4)
        again, created = await app.datasets.upload(TENANT, HEADER, [data[:7], data[7:]])
        assert not created
        assert again.dataset_id == first.dataset_id
        with pytest.raises(AlreadyExists) as conflict:
            await app.datasets.upload(TENANT, HEADER, [classification_jsonl(5)])
        assert conflict.value.reason is ErrorReason.DATASET_VERSION_CONFLICT
        with_id = DatasetHeader("other", "2.0.0", TaskType.CLASSIFICATION, request_id="up-1")
        await app.datasets.upload(TENANT, with_id, [classification_jsonl(2)])
        reused = DatasetHeader("other", "2.0.1", TaskType.CLASSIFICATION, request_id="up-1")
        with pytest.raises(AlreadyExists) as reuse:
            await app.datasets.upload(TENANT, reused, [classification_jsonl(2)])
        assert reuse.value.reason is ErrorReason.REQUEST_ID_CONFLICT
        with pytest.raises(DatasetInvalid) as bad:
            await app.datasets.upload(TENANT, DatasetHeader("x", "1.0", TaskType.QA), [b"{}"])
        assert bad.value.reason is ErrorReason.DATASET_HEADER_INVALID
        assert [v.field for v in bad.value.field_violations] == ["benchmark_version"]
        with pytest.raises(DatasetInvalid) as bad_line:
            await app.datasets.upload(
                TENANT, DatasetHeader("y", "1.0.0", TaskType.QA), [b'{"question": "q"}\n']
            )
        assert "line 1" in bad_line.value.message
        # Another tenant sees none of it.
        assert (await app.datasets.list("tenant-b")).items == ()
        with pytest.raises(NotFound):
            await app.datasets.get("tenant-b", dataset_id=first.dataset_id)
        assert (
            await app.datasets.get(TENANT, ref=DatasetRef("sst", "1.0.0"))
        ).dataset_id == first.dataset_id


@pytest.mark.anyio
async def test_create_run_validates_models_datasets_and_limits(tmp_path: Path) -> None:
    config = make_config(
        tmp_path, [simulated_model("sim")], max_subtasks_per_run=10, max_runs_in_flight_per_tenant=1
    )
    async with Evald.open(config, scoring=InlineScoring()) as app:
        await upload(app, "d", 4)
        ref = DatasetRef("d", "1.0.0")
        with pytest.raises(NotFound) as model:
            await app.runs.create(TENANT, RunSpec(models=("nope",), datasets=(ref,)))
        assert model.value.reason is ErrorReason.MODEL_NOT_FOUND
        with pytest.raises(NotFound) as dataset:
            await app.runs.create(
                TENANT, RunSpec(models=("sim",), datasets=(DatasetRef("d", "9.9.9"),))
            )
        assert dataset.value.reason is ErrorReason.DATASET_VERSION_NOT_FOUND
        with pytest.raises(ResourceExhausted) as too_big:
            await app.runs.create(TENANT, RunSpec(models=("sim",), datasets=(ref,), repeat=3))
        assert too_big.value.metadata["limit"] == "max_subtasks_per_run"
        with pytest.raises(InvalidArgument) as zero:
            RunSpec(models=("sim",), datasets=(ref,), max_concurrency=0)
        assert [v.field for v in zero.value.field_violations] == ["max_concurrency"]
        with pytest.raises(InvalidArgument) as repeat:
            RunSpec(models=("sim",), datasets=(ref,), repeat=0)
        assert [v.field for v in repeat.value.field_violations] == ["repeat"]
        run = await app.runs.create(TENANT, RunSpec(models=("sim",), datasets=(ref,)))
        if not (await app.runs.get(TENANT, run.run_id)).state.is_terminal:
            with pytest.raises(ResourceExhausted) as in_flight:
                await app.runs.create(TENANT, RunSpec(models=("sim",), datasets=(ref,)))
            assert in_flight.value.metadata["limit"] == "max_runs_in_flight_per_tenant"
        await wait_until_finished(app, run.run_id)
        with pytest.raises(NotFound):
            await app.runs.get("tenant-b", run.run_id)
        with pytest.raises(NotFound):
            await app.runs.watch("tenant-b", run.run_id)


@pytest.mark.anyio
async def test_list_runs_pages_with_validated_tokens(tmp_path: Path) -> None:
    async with Evald.open(
        make_config(tmp_path, [simulated_model("sim")]), scoring=InlineScoring()
    ) as app:
        await upload(app, "d", 1)
        spec = RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),))
        created = [(await app.runs.create(TENANT, spec)).run_id for _ in range(5)]
        for run_id in created:
            await wait_until_finished(app, run_id)
        seen: list[str] = []
        token = ""
        for _ in range(10):
            page = await app.runs.list(TENANT, page_size=2, page_token=token)
            seen.extend(r.run_id for r in page.items)
            token = page.next_page_token
            if not token:
                break
        assert seen == list(reversed(created))
        first = await app.runs.list(TENANT, page_size=2)
        with pytest.raises(InvalidArgument) as other_filter:
            await app.runs.list(
                TENANT, page_size=2, page_token=first.next_page_token, states=(RunState.FAILED,)
            )
        assert other_filter.value.reason is ErrorReason.PAGE_TOKEN_INVALID
        with pytest.raises(InvalidArgument) as garbage:
            await app.runs.list(TENANT, page_token="not-a-token")
        assert garbage.value.reason is ErrorReason.PAGE_TOKEN_INVALID
        with pytest.raises(InvalidArgument):
            await app.runs.list("tenant-b", page_token=first.next_page_token)


@pytest.mark.anyio
def with_grace(config: ServerConfig, grace_s: float) -> ServerConfig:
    return config.model_copy(
        update={"server": config.server.model_copy(update={"grace_s": grace_s})}
    )


@pytest.mark.anyio
async def test_drain_keeps_answers_that_arrive_within_the_grace_period(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=300)) as fake:
        config = with_grace(
            make_config(tmp_path, [fake.model_config("m1", max_concurrency=2)]), 10.0
        )
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 6)
            run = await app.runs.create(
                TENANT, RunSpec(models=("m1",), datasets=(DatasetRef("d", "1.0.0"),))
            )
            await fake.wait_until(lambda j: j.in_flight("m1") == 2, timeout_s=30)
            with anyio.fail_after(10):
                await app.drain()
        conn = sqlite3.connect(tmp_path / "evald.sqlite3")
        states = dict(
            conn.execute("SELECT state, COUNT(*) FROM subtasks GROUP BY state").fetchall()
        )
        conn.close()
        assert states == {"succeeded": 2, "pending": 4}  # the two in flight finished
        fake.configure(latency_ms=1)
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await wait_until_finished(app, run.run_id)
            assert (await app.runs.get(TENANT, run.run_id)).state is RunState.SUCCEEDED
        assert fake.journal.duplicates_after_success() == {}


@pytest.mark.anyio
async def test_drain_returns_calls_still_in_flight_after_the_grace_to_pending(
    tmp_path: Path,
) -> None:
    async with FakeProvider(FakeConfig(latency_ms=60_000)) as fake:
        config = with_grace(
            make_config(tmp_path, [fake.model_config("m1", max_concurrency=2)]), 0.2
        )
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 6)
            run = await app.runs.create(
                TENANT, RunSpec(models=("m1",), datasets=(DatasetRef("d", "1.0.0"),))
            )
            await fake.wait_until(lambda j: j.in_flight("m1") == 2, timeout_s=30)
            with anyio.fail_after(10):
                await app.drain()
        assert fake.journal.in_flight("m1") == 0
        conn = sqlite3.connect(tmp_path / "evald.sqlite3")
        states = dict(
            conn.execute("SELECT state, COUNT(*) FROM subtasks GROUP BY state").fetchall()
        )
        attempts = conn.execute("SELECT MAX(attempt) FROM subtasks").fetchone()[0]
        conn.close()
        assert states == {"pending": 6}
        assert attempts == 0  # aborted by the drain: no retry spent
        fake.configure(latency_ms=1)
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await wait_until_finished(app, run.run_id)
            assert (await app.runs.get(TENANT, run.run_id)).state is RunState.SUCCEEDED


@pytest.mark.anyio
async def test_a_scorer_failure_fails_only_that_task(tmp_path: Path) -> None:
    class FailOnSeven(InlineScoring):
        async def score_samples(self, task_type, samples, *, seed):  # type: ignore[no-untyped-def]
            if len(samples) == 7:
                return await InlineScoring(fail=True).score_samples(task_type, samples, seed=seed)
            return await super().score_samples(task_type, samples, seed=seed)

    async with Evald.open(
        make_config(tmp_path, [simulated_model("sim")]), scoring=FailOnSeven()
    ) as app:
        await upload(app, "seven", 7)
        await upload(app, "three", 3)
        spec = RunSpec(
            models=("sim",), datasets=(DatasetRef("seven", "1.0.0"), DatasetRef("three", "1.0.0"))
        )
        run = await app.runs.create(TENANT, spec)
        await wait_until_finished(app, run.run_id)
        done = await app.runs.get(TENANT, run.run_id)
        assert done.state is RunState.PARTIAL
        failed, ok = (await app.runs.results(TENANT, run.run_id)).items
        assert failed.status.value == "failed"
        assert [e.reason for e in failed.errors] == [ErrorReason.SCORER_FAILED]
        assert failed.errors[0].category.value == "eval_operator_error"
        assert ok.status.value == "success"
