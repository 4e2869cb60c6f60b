"""The response cache end to end: a real server (restarted on the same SQLite file), the
SDK and the fake provider, whose journal proves which calls reached it."""

from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_client import AsyncEvaldClient, GenerationParams, RetryPolicy, RunState
from evald_server.config import ServerConfig, parse_config
from evald_server.fake_provider import Behaviour, FakeChatRequest, FakeConfig, FakeProvider
from tests.harness import config_data, running_server

pytestmark = pytest.mark.anyio

N = 12
RECORDS = [{"id": f"r{i}", "input": f"Say {i}.", "reference": f"{i}"} for i in range(N)]
TOKENS = {"team-a": "token-a", "team-b": "token-b"}


def _config(
    tmp_path: Path, fake: FakeProvider, *, cache: dict[str, Any] | None = None, **model: Any
) -> ServerConfig:
    entry = {"id": "cand", "provider": "openai", "base_url": fake.base_url, "model": "cand-llm"}
    data = config_data(tmp_path, models=[{**entry, **model}], tokens=TOKENS)
    data["server"]["listen"] = "127.0.0.1:0"
    if cache is not None:
        data["cache"] = cache
    return parse_config(data)


async def _run(
    address: str, token: str, *, cache: bool = True, **options: Any
) -> tuple[Any, Any, list[Any]]:
    async with AsyncEvaldClient(address, token=token) as client:
        await client.upload_dataset(
            name="say", version="1.0.0", task_type="generation", records=RECORDS
        )
        run = await client.create_run(
            models=["cand"], datasets=[("say", "1.0.0")], response_cache=cache, **options
        )
        assert run.spec.response_cache is cache
        with anyio.fail_after(60):
            run = await client.wait(run.run_id)
        (result,) = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
    return run, result, samples


async def test_a_second_run_is_answered_from_the_cache_without_any_provider_call(
    tmp_path: Path,
) -> None:
    async with FakeProvider(FakeConfig(latency_ms=2)) as fake:
        async with running_server(_config(tmp_path, fake)) as address:
            _, first, first_samples = await _run(address, "token-a")
        assert fake.journal.requests == N
        assert first.execution.cache_hits == 0
        assert not any(s.cache_hit for s in first_samples)
        # The same file, now under a budget of one call a minute, one at a time: twelve
        # provider calls would take twelve minutes. Hits take no limit and no budget.
        slow = _config(tmp_path, fake, requests_per_minute=1.0, max_concurrency=1)
        async with running_server(slow) as address:
            run, second, samples = await _run(address, "token-a")
        assert run.state is RunState.SUCCEEDED
        assert fake.journal.requests == N, "the second run never reached the provider"
        assert all(s.cache_hit for s in samples)
        assert second.execution.cache_hits == N
        assert second.execution.requests == 0
        assert second.execution.samples_succeeded == N
        assert [s.output for s in samples] == [s.output for s in first_samples]
        scored = {k: v for k, v in first.metrics.items() if "latency" not in k}
        assert scored
        assert {k: second.metrics[k] for k in scored} == scored


async def test_another_tenant_gets_no_hit_unless_the_model_is_shared(tmp_path: Path) -> None:
    async with FakeProvider() as fake:
        async with running_server(_config(tmp_path, fake)) as address:
            await _run(address, "token-a")
            _, other, samples = await _run(address, "token-b")
        assert fake.journal.requests == 2 * N, "team-b paid for its own answers"
        assert other.execution.cache_hits == 0
        assert not any(s.cache_hit for s in samples)
        # The operator shares this model's cache across tenants: a new tenant's cache is
        # the model's, filled by whoever ran it (here, team-a again).
        shared = _config(tmp_path / "shared", fake, cache={"shared_models": ["cand"]})
        (tmp_path / "shared").mkdir()
        async with running_server(shared) as address:
            await _run(address, "token-a")
            _, other, samples = await _run(address, "token-b")
        assert fake.journal.requests == 3 * N
        assert other.execution.cache_hits == N


async def test_a_run_without_the_cache_neither_reads_nor_fills_it(tmp_path: Path) -> None:
    async with FakeProvider() as fake:
        async with running_server(_config(tmp_path, fake)) as address:
            await _run(address, "token-a", cache=False)
            await _run(address, "token-a")
            await _run(address, "token-a", cache=False)
        assert fake.journal.requests == 3 * N


async def test_truncated_empty_and_failed_answers_are_never_cached(tmp_path: Path) -> None:
    empty = {"Say 5.", "Say 6."}

    def answer(chat: FakeChatRequest) -> str:
        return "" if chat.last_content in empty else chat.last_content

    # One call at a time, in run order: requests 0-2 fail for good, 3-4 are cut by
    # max_tokens, records 5-6 answer nothing; the other five are complete.
    script = (
        *(Behaviour.error(500),) * 3,
        *(Behaviour.ok(finish_reason="length"),) * 2,
    )
    async with FakeProvider(FakeConfig(sequence=script), answer=answer) as fake:
        config = _config(tmp_path, fake, max_concurrency=1)
        no_retries = RetryPolicy(max_retries=0)
        async with running_server(config) as address:
            _, first, _ = await _run(address, "token-a", retry_policy=no_retries)
            assert first.execution.samples_failed == 3
            assert first.execution.samples_truncated == 2
            assert first.execution.samples_empty == 2
            _, second, again = await _run(address, "token-a", retry_policy=no_retries)
        assert second.execution.cache_hits == N - 7
        assert fake.journal.requests == N + 7, "only the five complete answers were cached"
        hits = {s.record_id for s in again if s.cache_hit}
        assert hits == {f"r{i}" for i in (7, 8, 9, 10, 11)}


async def test_a_repeat_still_samples_and_other_parameters_miss(tmp_path: Path) -> None:
    async with FakeProvider() as fake:
        async with running_server(_config(tmp_path, fake)) as address:
            await _run(address, "token-a", repeat=2)
            assert fake.journal.requests == 2 * N, "repeat 1 is not repeat 0's answer"
            _, same, _ = await _run(address, "token-a", repeat=2)
            assert same.execution.cache_hits == 2 * N
            await _run(address, "token-a", generation=GenerationParams(temperature=0.7))
        assert fake.journal.requests == 3 * N, "a changed parameter is a different request"
