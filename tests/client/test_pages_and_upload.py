"""Paged listings are iterated to the end; uploads are streamed as header + chunks."""

import hashlib
import json
from pathlib import Path

import pytest

import evald_client as ec
from evald.v1 import enums_pb2
from tests.client import _protos
from tests.client._servicer import Failure, FakeEvaluationService

FAILED = enums_pb2.SUBTASK_STATE_FAILED_PERMANENT


@pytest.mark.anyio
async def test_list_runs_walks_every_page(servicer: FakeEvaluationService, address: str) -> None:
    for index in range(7):
        servicer.add_run(_protos.run(f"r-{index}"))
    async with ec.AsyncEvaldClient(address) as client:
        runs = [run async for run in client.list_runs(page_size=3)]
    assert [r.run_id for r in runs] == [f"r-{i}" for i in range(7)]
    assert servicer.page_requests == [
        ("ListRuns", 3, ""),
        ("ListRuns", 3, "3"),
        ("ListRuns", 3, "6"),
    ]


@pytest.mark.anyio
async def test_samples_are_filtered_and_paged(
    servicer: FakeEvaluationService, address: str
) -> None:
    samples = [_protos.sample(i, state=FAILED if i % 3 == 0 else 3) for i in range(10)]
    samples += [_protos.sample(i, task_id="t-2") for i in range(10, 14)]
    servicer.add_run(_protos.run("r-1"), samples=samples)
    async with ec.AsyncEvaldClient(address) as client:
        failed = [
            s
            async for s in client.samples(
                "r-1", task_id="t-1", state=ec.SubtaskState.FAILED_PERMANENT, page_size=2
            )
        ]
        everything = [s async for s in client.samples("r-1")]
    assert [s.record_id for s in failed] == ["rec-0", "rec-3", "rec-6", "rec-9"]
    assert all(s.state is ec.SubtaskState.FAILED_PERMANENT for s in failed)
    assert failed[0].last_error is not None
    assert failed[0].last_error.reason == "PROVIDER_HTTP_5XX"
    assert failed[0].latency_ms is None
    assert len(everything) == 14
    assert everything[1].latency_ms == pytest.approx(51.0)


@pytest.mark.anyio
async def test_results_gathers_every_page(servicer: FakeEvaluationService, address: str) -> None:
    servicer.add_run(_protos.run("r-1"))
    servicer.results["r-1"] = [_protos.result(f"t-{i}", accuracy=i / 10) for i in range(5)]
    async with ec.AsyncEvaldClient(address) as client:
        results = await client.results("r-1")
    assert [r.task_id for r in results] == [f"t-{i}" for i in range(5)]
    assert [req[2] for req in servicer.page_requests] == ["", "3"]


@pytest.mark.anyio
async def test_a_repeated_page_token_fails_instead_of_looping(
    servicer: FakeEvaluationService, address: str
) -> None:
    for index in range(4):
        servicer.add_run(_protos.run(f"r-{index}"))
    servicer._page = lambda name, items, size, token: (items[:1], "same")  # type: ignore[method-assign]
    async with ec.AsyncEvaldClient(address) as client:
        with pytest.raises(ec.InternalError, match="repeated page token"):
            _ = [run async for run in client.list_runs()]


@pytest.mark.anyio
async def test_upload_from_records_streams_header_then_bounded_chunks(
    servicer: FakeEvaluationService, address: str
) -> None:
    records = [{"input": f"review number {i} ✓", "label": "positive"} for i in range(100)]
    async with ec.AsyncEvaldClient(address) as client:
        dataset = await client.upload_dataset(
            name="sentiment",
            version="1.0",
            task_type=ec.TaskType.CLASSIFICATION,
            records=records,
            prompt_template="Classify: {input}",
            request_id="req-1",
            chunk_bytes=300,
        )
    header, sizes, content = servicer.uploads[0]
    assert (header.name, header.benchmark_version, header.request_id) == (
        "sentiment",
        "1.0",
        "req-1",
    )
    assert header.task_type == enums_pb2.TASK_TYPE_CLASSIFICATION
    assert header.prompt_template == "Classify: {input}"
    assert all(size <= 300 for size in sizes)
    assert len(sizes) > 10
    lines = content.decode("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == records
    assert dataset.record_count == 100
    assert dataset.task_type is ec.TaskType.CLASSIFICATION
    assert dataset.ref == ec.DatasetRef("sentiment", "1.0")


@pytest.mark.anyio
async def test_upload_from_a_path_sends_the_file_bytes_unchanged(
    servicer: FakeEvaluationService, address: str, tmp_path: Path
) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_bytes(b"".join(b'{"question": "q%d", "answers": ["a"]}\n' % i for i in range(500)))
    async with ec.AsyncEvaldClient(address) as client:
        dataset = await client.upload_dataset(
            name="qa", version="2", task_type="qa", path=path, chunk_bytes=4096
        )
    _, sizes, content = servicer.uploads[0]
    assert content == path.read_bytes()
    assert sizes[:-1] == [4096] * (len(sizes) - 1)
    assert dataset.content_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    async with ec.AsyncEvaldClient(address) as client:
        assert (await client.get_dataset(name="qa", version="2")).dataset_id == dataset.dataset_id
        listed = [d async for d in client.list_datasets(name="qa")]
    assert listed == [dataset]


@pytest.mark.anyio
async def test_a_rejected_upload_raises_dataset_invalid_with_line_and_field(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.fail["UploadDataset.chunk"] = Failure(
        ec_code := __import__("grpc").StatusCode.INVALID_ARGUMENT,
        "line 3: field 'label' is required",
        reason="DATASET_FIELD_MISSING",
        metadata={"line": "3", "field": "label"},
    )
    assert ec_code.name == "INVALID_ARGUMENT"
    records = [{"input": "x" * 1000} for _ in range(2000)]  # far more than one chunk
    async with ec.AsyncEvaldClient(address) as client:
        with pytest.raises(ec.DatasetInvalid) as info:
            await client.upload_dataset(
                name="s",
                version="1",
                task_type="classification",
                records=records,
                chunk_bytes=1024,
            )
    assert dict(info.value.metadata) == {"line": "3", "field": "label"}
    assert servicer.uploads == []


@pytest.mark.anyio
async def test_a_bad_record_fails_before_anything_is_sent(
    servicer: FakeEvaluationService, address: str
) -> None:
    records: list[object] = [{"input": "ok", "label": "a"}, {"input": {1, 2}}]
    async with ec.AsyncEvaldClient(address) as client:
        with pytest.raises(TypeError, match=r"records\[1\] is not JSON-serialisable"):
            await client.upload_dataset(
                name="s",
                version="1",
                task_type="classification",
                records=records,  # type: ignore[arg-type]
            )
        with pytest.raises(TypeError, match=r"records\[0\] is a list, not a mapping"):
            await client.upload_dataset(
                name="s",
                version="1",
                task_type="qa",
                records=[["not", "a", "dict"]],  # type: ignore[list-item]
            )
        assert [m.model_id for m in await client.list_models()] == ["sim-a", "sim-b"]
    assert servicer.uploads == []


@pytest.mark.anyio
async def test_upload_arguments_are_checked_before_anything_is_sent(
    servicer: FakeEvaluationService, address: str, tmp_path: Path
) -> None:
    async with ec.AsyncEvaldClient(address) as client:
        with pytest.raises(ValueError, match="exactly one of path and records"):
            await client.upload_dataset(name="s", version="1", task_type="qa")
        with pytest.raises(ValueError, match="exactly one of path and records"):
            await client.upload_dataset(
                name="s", version="1", task_type="qa", records=[], path=tmp_path / "x"
            )
        with pytest.raises(ValueError, match="chunk_bytes"):
            await client.upload_dataset(
                name="s", version="1", task_type="qa", records=[], chunk_bytes=0
            )
        with pytest.raises(ValueError, match="'poetry' is not a valid TaskType"):
            await client.upload_dataset(name="s", version="1", task_type="poetry", records=[])
    assert servicer.uploads == []


@pytest.mark.anyio
async def test_create_run_sends_the_whole_spec(
    servicer: FakeEvaluationService, address: str
) -> None:
    async with ec.AsyncEvaldClient(address) as client:
        run = await client.create_run(
            models=["sim-a", "sim-b"],
            datasets=[ec.DatasetRef("sentiment", "1.0"), ("qa", "2")],
            name="nightly",
            max_concurrency=8,
            repeat=3,
            retry_policy=ec.RetryPolicy(
                max_retries=2, backoff_s=(0.5, 2.0), jitter_fraction=0.1, retry_after_cap_s=30.0
            ),
            generation=ec.GenerationParams(temperature=0.0, max_tokens=32, stop=("\n",)),
            labels={"team": "search"},
            request_id="req-9",
        )
    request = servicer.created[0]
    spec = request.spec
    assert request.request_id == "req-9"
    assert list(spec.model_ids) == ["sim-a", "sim-b"]
    assert [(d.name, d.benchmark_version) for d in spec.datasets] == [
        ("sentiment", "1.0"),
        ("qa", "2"),
    ]
    assert spec.max_concurrency == 8
    assert spec.repeat == 3
    assert spec.retry_policy.max_retries == 2
    assert [b.ToNanoseconds() for b in spec.retry_policy.backoff] == [500_000_000, 2_000_000_000]
    assert spec.generation_overrides.HasField("temperature")
    assert not spec.generation_overrides.HasField("top_p")
    assert dict(spec.labels) == {"team": "search"}
    # The returned Run is the typed echo of the spec.
    assert run.spec.retry_policy == ec.RetryPolicy(
        max_retries=2, backoff_s=(0.5, 2.0), jitter_fraction=0.1, retry_after_cap_s=30.0
    )
    assert run.spec.generation == ec.GenerationParams(temperature=0.0, max_tokens=32, stop=("\n",))
    assert run.spec.repeat == 3
    assert run.spec.max_concurrency == 8
    assert run.state is ec.RunState.PENDING


@pytest.mark.anyio
async def test_cancel_and_retry(servicer: FakeEvaluationService, address: str) -> None:
    servicer.add_run(_protos.run("r-1"))
    async with ec.AsyncEvaldClient(address) as client:
        cancelled = await client.cancel_run("r-1")
        outcome = await client.retry_run(
            "r-1", task_ids=["t-1"], categories=[ec.ErrorCategory.MODEL_PROVIDER_ERROR]
        )
    assert cancelled.state is ec.RunState.CANCELLED
    assert cancelled.is_terminal
    assert outcome.requeued == 3
    assert outcome.run.run_id == "r-1"
