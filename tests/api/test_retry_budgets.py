"""Retry budgets per error class, through the gRPC server, the SDK and the fake
provider: a rate-limited call spends its own budget, not the transient one; the
counts are visible per sample and in SampleFailed; a client that sets only
max_retries gets what it always got."""

from contextlib import aclosing
from pathlib import Path

import anyio
import grpc
import pytest

from evald.v1 import dataset_pb2, run_pb2, service_pb2
from evald_client import AsyncEvaldClient, RetryPolicy, RunState, SampleFailed, SubtaskState
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider
from tests._shared import classification_records, jsonl
from tests.api._support import assert_reason, chunk, fails, header, raw_stub
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio
FAST = {"backoff_s": (0.01,), "jitter_fraction": 0.0, "retry_after_cap_s": 0.05}
RATE_LIMITED_5 = (*(Behaviour.rate_limited() for _ in range(5)),)


async def _one_record_run(
    client: AsyncEvaldClient, fake: FakeProvider, policy: RetryPolicy, *behaviours: Behaviour
) -> tuple[str, list[SampleFailed]]:
    """A run of one record whose calls meet ``behaviours`` in order, then answers."""
    fake.configure(sequence=behaviours)
    fake.reset()
    run = await client.create_run(models=["m1"], datasets=[("d", "1.0.0")], retry_policy=policy)
    failures = []
    with anyio.fail_after(30):
        async with aclosing(client.watch(run.run_id)) as events:
            async for event in events:
                if isinstance(event, SampleFailed):
                    failures.append(event)
    return run.run_id, failures


async def test_rate_limited_calls_spend_their_own_budget(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig()) as fake:
        model = fake.model_config("m1", max_concurrency=1).model_dump()
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="d",
                version="1.0.0",
                task_type="classification",
                records=classification_records(1, prefix="c"),
            )
            # Five 429s against max_retries = 1 alone: the shared budget runs out.
            old = RetryPolicy(max_retries=1, **FAST)
            run_id, failures = await _one_record_run(client, fake, old, *RATE_LIMITED_5)
            (failed,) = failures
            assert failed.attempts == 2
            assert (failed.failed_attempts.rate_limited, failed.failed_attempts.transient) == (2, 0)
            assert (await client.get_run(run_id)).state is RunState.FAILED

            # With a budget of its own, the same 429s go through; max_retries is untouched.
            split = RetryPolicy(max_retries=1, max_rate_limited_retries=10, **FAST)
            run_id, failures = await _one_record_run(client, fake, split, *RATE_LIMITED_5)
            assert failures == []
            (sample,) = [s async for s in client.samples(run_id)]
            assert sample.state is SubtaskState.SUCCEEDED
            assert sample.attempts == 6
            assert sample.failed_attempts.rate_limited == 5
            assert (await client.get_run(run_id)).spec.retry_policy.max_rate_limited_retries == 10

            # Transient failures still share max_retries = 1: the second 503 is final.
            run_id, failures = await _one_record_run(
                client, fake, split, Behaviour.error(503), Behaviour.error(503)
            )
            (failed,) = failures
            assert failed.failed_attempts.transient == 2
            assert failed.error.reason == "PROVIDER_HTTP_5XX"
            # Timeouts have their own budget too: none allowed here, the first is final.
            no_timeouts = RetryPolicy(max_retries=5, max_timeout_retries=0, **FAST)
            run_id, failures = await _one_record_run(
                client, fake, no_timeouts, Behaviour.error(408)
            )
            (failed,) = failures
            assert (failed.attempts, failed.failed_attempts.timeout) == (1, 1)


async def test_bad_budgets_are_refused_naming_the_field(tmp_path: Path) -> None:
    async with running_server(make_config(tmp_path)) as address, raw_stub(address) as stub:
        records = classification_records(2, prefix="c")
        await stub.UploadDataset(iter([header("d"), chunk(jsonl(records))]))
        cases = [
            ("spec.retry_policy.max_timeout_retries", {"max_timeout_retries": 101}, {}),
            ("spec.retry_policy.max_rate_limited_retries", {"max_rate_limited_retries": -1}, {}),
            ("spec.budget.max_tokens", {}, {"max_tokens": 0}),
            ("spec.budget.max_cost_usd", {}, {"max_cost_usd": -1.0}),
            # The simulated model has no price: a cost budget could never be reached.
            ("spec.budget.max_cost_usd", {}, {"max_cost_usd": 1.0}),
        ]
        for field, policy, budget in cases:
            spec = run_pb2.RunSpec(
                model_ids=["sim-good"],
                datasets=[dataset_pb2.DatasetRef(name="d", benchmark_version="1.0.0")],
                retry_policy=run_pb2.RetryPolicy(**policy),
                budget=run_pb2.RunBudget(**budget),
            )
            failure = await fails(stub.CreateRun(service_pb2.CreateRunRequest(spec=spec)))
            assert_reason(failure, grpc.StatusCode.INVALID_ARGUMENT, "RUN_SPEC_INVALID")
            assert field in failure.violations, (field, failure.violations)
