"""Interrupted streams, finish_reason and unknown usage, through the real service.

A real gRPC server on 127.0.0.1 port 0 with a real SQLite file, the SDK, and the fake
provider on loopback behaving like llama-cpp-python's server.
"""

from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_client import (
    AsyncEvaldClient,
    FinishReason,
    GenerationParams,
    ResultStatus,
    RetryPolicy,
    SubtaskState,
)
from evald_server.config import parse_config
from evald_server.fake_provider import FakeProvider
from tests.harness import config_data, running_server

pytestmark = pytest.mark.anyio

RECORDS = [
    {
        "id": f"r{i}",
        "input": f"one two three four five {i}",
        "label": "pos",
        "choices": ["pos", "neg"],
    }
    for i in range(8)
]


def _model(fake: FakeProvider, **fields: Any) -> dict[str, Any]:
    return {"id": "fake", "provider": "openai", "base_url": fake.base_url, **fields}


async def _run(
    tmp_path: Path,
    model: dict[str, Any],
    *,
    generation: GenerationParams | None = None,
    retries: int = 2,
) -> tuple[Any, list[Any], list[Any]]:
    config = parse_config(config_data(tmp_path, models=[model]))
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="d", version="1.0.0", task_type="classification", records=RECORDS
        )
        run = await client.create_run(
            models=["fake"],
            datasets=[("d", "1.0.0")],
            generation=generation,
            retry_policy=RetryPolicy(max_retries=retries, backoff_s=(0.01,), jitter_fraction=0.0),
        )
        with anyio.fail_after(60):
            run = await client.wait(run.run_id)
        results = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
    return run, results, samples


async def test_interrupted_streams_are_never_stored_as_empty_successes(tmp_path: Path) -> None:
    # What broke with llama-cpp-python (interrupt_requests = True), max_concurrency 2 and
    # stream = true: every answer came back "" and the task reported success.
    async with FakeProvider() as fake:
        fake.configure(interrupt_streams=True, stream_chunk_ms=20, latency_ms=5)
        _, (result,), samples = await _run(
            tmp_path, _model(fake, stream=True, max_concurrency=2), retries=1
        )
    for sample in samples:
        if sample.state is SubtaskState.SUCCEEDED:
            assert sample.output.strip()
            assert sample.finish_reason is FinishReason.STOP
        else:
            assert sample.state is SubtaskState.FAILED_PERMANENT
            assert sample.last_error is not None
            assert "no finish_reason" in sample.last_error.message
    # Interrupted attempts were seen as failures (and retried), not as answers.
    cut = [s for s in samples if s.first_error and "no finish_reason" in s.first_error.message]
    assert cut
    assert result.execution.retries >= len(cut)
    assert result.execution.samples_empty == 0
    if any(s.state is SubtaskState.FAILED_PERMANENT for s in samples):
        assert result.status is not ResultStatus.SUCCESS


async def test_max_tokens_cuts_are_stored_and_counted(tmp_path: Path) -> None:
    async with FakeProvider() as fake:
        _, (result,), samples = await _run(
            tmp_path, _model(fake), generation=GenerationParams(max_tokens=2)
        )
    assert {s.finish_reason for s in samples} == {FinishReason.LENGTH}
    assert all(len(s.output.split()) == 2 for s in samples)
    assert result.execution.samples_truncated == len(RECORDS)
    assert result.execution.samples_empty == 0


async def test_unknown_usage_is_not_reported_as_zero(tmp_path: Path) -> None:
    async with FakeProvider() as fake:
        fake.configure(send_usage=False, stream_chunk_ms=2)
        _, (result,), samples = await _run(tmp_path, _model(fake, stream=True))
    assert all(s.state is SubtaskState.SUCCEEDED for s in samples)
    assert {(s.prompt_tokens, s.completion_tokens) for s in samples} == {(None, None)}
    assert all(s.decode_tokens_per_second is None for s in samples)
    profile = result.execution
    assert profile.samples_without_usage == len(RECORDS)
    assert profile.decode_tokens_per_second is None
    assert (profile.prompt_tokens, profile.completion_tokens) == (None, None)
    assert profile.tokens_per_second is None


async def test_streamed_usage_gives_a_per_call_decode_rate(tmp_path: Path) -> None:
    async with FakeProvider() as fake:
        fake.configure(stream_chunk_ms=5)
        _, (result,), samples = await _run(tmp_path, _model(fake, stream=True))
    for sample in samples:
        assert sample.completion_tokens is not None
        assert sample.latency_ms is not None
        assert sample.ttft_ms is not None
        expected = sample.completion_tokens / ((sample.latency_ms - sample.ttft_ms) / 1000)
        assert sample.decode_tokens_per_second == pytest.approx(expected)
    profile = result.execution
    assert profile.samples_without_usage == 0
    assert profile.completion_tokens == sum(s.completion_tokens or 0 for s in samples)
    assert profile.tokens_per_second is not None
    assert profile.tokens_per_second > 0
    assert profile.decode_tokens_per_second is not None
    assert profile.decode_tokens_per_second > 0
    # 6 tokens per answer arrive ~5 ms apart: well under 1,000 tokens/s per call.
    assert profile.decode_tokens_per_second < 1000


@pytest.mark.parametrize(
    ("task_type", "record", "libraries"),
    [
        (
            "summarization",
            {"document": "The cat sat on the mat. It slept.", "summary": "A cat slept."},
            {"numpy", "rouge-score", "nltk"},
        ),
        ("generation", {"input": "Say a", "reference": "a+", "match": "regex"}, {"google-re2"}),
        ("classification", {"input": "x", "label": "a", "choices": ["a", "b"]}, {"numpy"}),
    ],
)
async def test_results_name_their_dataset_and_the_scorer_libraries(
    tmp_path: Path, task_type: str, record: dict[str, Any], libraries: set[str]
) -> None:
    config = parse_config(config_data(tmp_path))  # simulated models
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        records = [{"id": f"r{i}", **record} for i in range(3)]
        dataset = await client.upload_dataset(
            name="d", version="1.0.0", task_type=task_type, records=records
        )
        run = await client.create_run(models=["sim-good"], datasets=[("d", "1.0.0")])
        with anyio.fail_after(60):
            await client.wait(run.run_id)
        (result,) = await client.results(run.run_id)
    assert dataset.dataset_id
    assert result.benchmark.dataset_id == dataset.dataset_id
    dependencies = result.provenance.dependencies
    assert libraries <= set(dependencies), dependencies
    assert all(v and v != "not installed" for v in dependencies.values()), dependencies
