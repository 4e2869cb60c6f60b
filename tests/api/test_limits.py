"""Limits and bad requests: each refused with its code, ErrorInfo reason and metadata,
and a BadRequest naming the request field (a path in the request message) where a
field is wrong."""

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anyio
import grpc
import pytest
from google.protobuf import duration_pb2

from evald.v1 import dataset_pb2, enums_pb2, model_pb2, run_pb2, service_pb2
from evald_client import AsyncEvaldClient, ResourceExhausted, RunState
from tests._shared import classification_records, simulated_model, wait_for
from tests.api._support import assert_reason, fails, raw_stub, stream_fails
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

MAX_SUBTASKS = 30
RECORDS = 20
INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    config = make_config(
        tmp_path_factory.mktemp("limits"),
        models=[simulated_model("sim-a"), simulated_model("sim-b")],
        limits={"max_subtasks_per_run": MAX_SUBTASKS},
    )
    async with running_server(config) as bound, AsyncEvaldClient(bound) as client:
        for name in ("twenty", "other"):
            await client.upload_dataset(
                name=name,
                version="1.0.0",
                task_type="classification",
                records=classification_records(RECORDS, prefix="c"),
            )
        yield bound


def spec(**fields: Any) -> run_pb2.RunSpec:
    values: dict[str, Any] = {
        "model_ids": ["sim-a"],
        "datasets": [dataset_pb2.DatasetRef(name="twenty", benchmark_version="1.0.0")],
    }
    values.update(fields)
    return run_pb2.RunSpec(**values)


def create(value: run_pb2.RunSpec, request_id: str = "") -> service_pb2.CreateRunRequest:
    return service_pb2.CreateRunRequest(spec=value, request_id=request_id)


async def test_max_subtasks_per_run_names_the_limit(address: str) -> None:
    async with raw_stub(address) as stub:
        for too_big in (spec(model_ids=["sim-a", "sim-b"]), spec(repeat=2)):
            failure = await fails(stub.CreateRun(create(too_big)))
            assert_reason(
                failure,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "LIMIT_EXCEEDED",
                limit="max_subtasks_per_run",
                limitValue=str(MAX_SUBTASKS),
                requested=str(2 * RECORDS),
            )
            assert "max_subtasks_per_run" in failure.message
        runs = await stub.ListRuns(service_pb2.ListRunsRequest())
        assert list(runs.runs) == [], "a refused run leaves nothing behind"


BAD_SPECS: dict[str, tuple[run_pb2.RunSpec, str]] = {
    "max_concurrency_zero": (spec(max_concurrency=0), "spec.max_concurrency"),
    "max_concurrency_negative": (spec(max_concurrency=-1), "spec.max_concurrency"),
    "repeat_negative": (spec(repeat=-1), "spec.repeat"),
    "repeat_over_100": (spec(repeat=101), "spec.repeat"),
    "no_models": (spec(model_ids=[]), "spec.model_ids"),
    "model_twice": (spec(model_ids=["sim-a", "sim-a"]), "spec.model_ids"),
    "empty_model_id": (spec(model_ids=[""]), "spec.model_ids"),
    "no_datasets": (spec(datasets=[]), "spec.datasets"),
    "dataset_without_version": (
        spec(datasets=[dataset_pb2.DatasetRef(name="twenty")]),
        "spec.datasets[0]",
    ),
    "name_too_long": (spec(name="n" * 257), "spec.name"),
    "negative_max_retries": (
        spec(retry_policy=run_pb2.RetryPolicy(max_retries=-1)),
        "spec.retry_policy.max_retries",
    ),
    "jitter_over_one": (
        spec(retry_policy=run_pb2.RetryPolicy(jitter_fraction=2.0)),
        "spec.retry_policy.jitter_fraction",
    ),
    "negative_backoff": (
        spec(retry_policy=run_pb2.RetryPolicy(backoff=[duration_pb2.Duration(seconds=-1)])),
        "spec.retry_policy.backoff",
    ),
    "temperature_over_two": (
        spec(generation_overrides=model_pb2.GenerationParams(temperature=3.0)),
        "spec.generation_overrides.temperature",
    ),
    "zero_max_tokens": (
        spec(generation_overrides=model_pb2.GenerationParams(max_tokens=0)),
        "spec.generation_overrides.max_tokens",
    ),
}


@pytest.mark.parametrize("case", list(BAD_SPECS), ids=list(BAD_SPECS))
async def test_invalid_run_spec_names_the_request_field(address: str, case: str) -> None:
    bad, field = BAD_SPECS[case]
    async with raw_stub(address) as stub:
        failure = await fails(stub.CreateRun(create(bad)))
        assert_reason(failure, INVALID, "RUN_SPEC_INVALID")
        assert field in failure.violations, failure.violations


OVERSIZED_LISTS: dict[str, tuple[run_pb2.RunSpec, str, str]] = {
    # (spec, the violated field, what the message says) — seen accepted: an 800 KB spec.
    "backoff_200000": (
        spec(
            retry_policy=run_pb2.RetryPolicy(backoff=[duration_pb2.Duration(seconds=1)] * 200_000)
        ),
        "spec.retry_policy.backoff",
        "at most 16 entries, got 200000",
    ),
    "stop_5000_of_1kb": (
        spec(generation_overrides=model_pb2.GenerationParams(stop=["s" * 1024] * 5000)),
        "spec.generation_overrides.stop",
        "at most 16 entries, got 5000",
    ),
    "stop_string_1kb": (
        spec(generation_overrides=model_pb2.GenerationParams(stop=["end", "s" * 1024])),
        "spec.generation_overrides.stop[1]",
        "at most 256 characters per entry, got 1024",
    ),
    "models_100": (
        spec(model_ids=[f"m{i}" for i in range(100)]),
        "spec.model_ids",
        "at most 32 entries, got 100",
    ),
    "datasets_100": (
        spec(
            datasets=[
                dataset_pb2.DatasetRef(name=f"d{i}", benchmark_version="1.0.0") for i in range(100)
            ]
        ),
        "spec.datasets",
        "at most 64 entries, got 100",
    ),
    "labels_1000": (
        spec(labels={f"k{i}": "v" for i in range(1000)}),
        "spec.labels",
        "at most 64 entries, got 1000",
    ),
    "dataset_stop_5000": (
        spec(
            dataset_options=[
                run_pb2.DatasetRunOptions(
                    dataset=dataset_pb2.DatasetRef(name="twenty", benchmark_version="1.0.0"),
                    generation_overrides=model_pb2.GenerationParams(stop=["s"] * 5000),
                )
            ]
        ),
        "spec.dataset_options[0].generation_overrides.stop",
        "at most 16 entries, got 5000",
    ),
    "dataset_name_1kb": (
        spec(datasets=[dataset_pb2.DatasetRef(name="d" * 1024, benchmark_version="1.0.0")]),
        "spec.datasets[0]",
        "at most 128 characters",
    ),
}


@pytest.mark.parametrize("case", list(OVERSIZED_LISTS), ids=list(OVERSIZED_LISTS))
async def test_every_spec_list_is_bounded_and_the_bound_named(address: str, case: str) -> None:
    bad, field, says = OVERSIZED_LISTS[case]
    async with raw_stub(address) as stub:
        failure = await fails(stub.CreateRun(create(bad), timeout=30))
        assert_reason(failure, INVALID, "RUN_SPEC_INVALID")
        assert field in failure.violations, failure.violations
        assert says in failure.message
        assert len(failure.message) < 1000, "the error does not echo the oversized list"
        runs = await stub.ListRuns(service_pb2.ListRunsRequest())
        assert list(runs.runs) == []


async def test_unknown_model_and_dataset_version(address: str) -> None:
    async with raw_stub(address) as stub:
        failure = await fails(stub.CreateRun(create(spec(model_ids=["sim-a", "gpt-nope"]))))
        assert_reason(failure, NOT_FOUND, "MODEL_NOT_FOUND", modelId="gpt-nope")
        ref = dataset_pb2.DatasetRef(name="twenty", benchmark_version="9.9.9")
        failure = await fails(stub.CreateRun(create(spec(datasets=[ref]))))
        assert_reason(
            failure, NOT_FOUND, "DATASET_VERSION_NOT_FOUND", name="twenty", benchmarkVersion="9.9.9"
        )
        failure = await fails(stub.GetDataset(service_pb2.GetDatasetRequest(ref=ref)))
        assert_reason(failure, NOT_FOUND, "DATASET_VERSION_NOT_FOUND")
        failure = await fails(stub.GetDataset(service_pb2.GetDatasetRequest(dataset_id="ds_nope")))
        assert_reason(failure, NOT_FOUND, "DATASET_NOT_FOUND")
        failure = await fails(stub.GetRun(service_pb2.GetRunRequest(run_id="run_nope")))
        assert_reason(failure, NOT_FOUND, "RUN_NOT_FOUND", runId="run_nope")


async def test_required_fields(address: str) -> None:
    async with raw_stub(address) as stub:
        for call in (
            stub.GetRun(service_pb2.GetRunRequest()),
            stub.CancelRun(service_pb2.CancelRunRequest()),
            stub.RetryRun(service_pb2.RetryRunRequest()),
            stub.ListResults(service_pb2.ListResultsRequest()),
            stub.ListSamples(service_pb2.ListSamplesRequest()),
        ):
            failure = await fails(call)
            assert_reason(failure, INVALID, "INVALID_ARGUMENT", field="run_id")
            assert "run_id" in failure.violations
        _, failure = await stream_fails(stub.WatchRun(service_pb2.WatchRunRequest()))
        assert_reason(failure, INVALID, "INVALID_ARGUMENT")
        assert "run_id" in failure.violations
        failure = await fails(stub.GetDataset(service_pb2.GetDatasetRequest()))
        assert_reason(failure, INVALID, "INVALID_ARGUMENT")
        assert failure.violations


async def _finished_run(stub: Any) -> run_pb2.Run:
    response = await stub.CreateRun(create(spec(), request_id="finished-run"))
    run_id = response.run.run_id

    async def terminal() -> Any:
        run = (await stub.GetRun(service_pb2.GetRunRequest(run_id=run_id))).run
        return run if run.state >= enums_pb2.RUN_STATE_SUCCEEDED else None

    finished: run_pb2.Run = await wait_for(terminal)
    return finished


async def test_page_size_and_page_token(address: str) -> None:
    async with raw_stub(address) as stub:
        run = await _finished_run(stub)
        listings: list[tuple[Any, Any]] = [
            (stub.ListDatasets, service_pb2.ListDatasetsRequest),
            (stub.ListRuns, service_pb2.ListRunsRequest),
            (
                stub.ListResults,
                lambda **kw: service_pb2.ListResultsRequest(run_id=run.run_id, **kw),
            ),
            (
                stub.ListSamples,
                lambda **kw: service_pb2.ListSamplesRequest(run_id=run.run_id, **kw),
            ),
        ]
        for rpc, request in listings:
            failure = await fails(rpc(request(page_size=-1)))
            assert_reason(failure, INVALID, "INVALID_ARGUMENT")
            assert "page_size" in failure.violations
            for garbage in ("garbage", "e30", "!!!"):
                failure = await fails(rpc(request(page_token=garbage)))
                assert_reason(failure, INVALID, "PAGE_TOKEN_INVALID")
                assert "page_token" in failure.violations

        # A real token is bound to its listing and its filters.
        first = await stub.ListDatasets(service_pb2.ListDatasetsRequest(page_size=1))
        token = first.next_page_token
        assert token
        second = await stub.ListDatasets(
            service_pb2.ListDatasetsRequest(page_size=1, page_token=token)
        )
        assert second.datasets[0].dataset_id != first.datasets[0].dataset_id
        failure = await fails(stub.ListRuns(service_pb2.ListRunsRequest(page_token=token)))
        assert_reason(failure, INVALID, "PAGE_TOKEN_INVALID")
        failure = await fails(
            stub.ListDatasets(service_pb2.ListDatasetsRequest(name="twenty", page_token=token))
        )
        assert_reason(failure, INVALID, "PAGE_TOKEN_INVALID")
        samples = await stub.ListSamples(
            service_pb2.ListSamplesRequest(run_id=run.run_id, page_size=3)
        )
        assert len(samples.samples) == 3
        failure = await fails(
            stub.ListSamples(
                service_pb2.ListSamplesRequest(
                    run_id=run.run_id,
                    page_token=samples.next_page_token,
                    states=[enums_pb2.SUBTASK_STATE_CANCELLED],
                )
            )
        )
        assert_reason(failure, INVALID, "PAGE_TOKEN_INVALID")

        # An enum value this server does not know names its field.
        failure = await fails(
            stub.ListRuns(service_pb2.ListRunsRequest(states=[cast(enums_pb2.RunState, 99)]))
        )
        assert_reason(failure, INVALID, "INVALID_ARGUMENT")
        assert "states" in failure.violations


async def test_watch_cursor_outside_the_log(address: str) -> None:
    async with raw_stub(address) as stub:
        run = await _finished_run(stub)
        _, failure = await stream_fails(
            stub.WatchRun(service_pb2.WatchRunRequest(run_id=run.run_id, after_seq=-1))
        )
        assert_reason(failure, INVALID, "INVALID_ARGUMENT")
        assert "after_seq" in failure.violations
        # Beyond the end of the log: the app defines it as a bad argument naming lastSeq.
        _, failure = await stream_fails(
            stub.WatchRun(
                service_pb2.WatchRunRequest(run_id=run.run_id, after_seq=run.last_seq + 5)
            )
        )
        assert_reason(failure, INVALID, "INVALID_ARGUMENT", lastSeq=str(run.last_seq))


async def test_request_id_too_long_names_the_field(address: str) -> None:
    async with raw_stub(address) as stub:
        failure = await fails(stub.CreateRun(create(spec(), request_id="r" * 129)))
        assert_reason(failure, INVALID, "INVALID_ARGUMENT")
        assert "request_id" in failure.violations


async def test_max_runs_in_flight_per_tenant(tmp_path: Path) -> None:
    config = make_config(
        tmp_path,
        models=[simulated_model("sim-slow", latency_ms=5_000, max_concurrency=1)],
        limits={"max_runs_in_flight_per_tenant": 1},
    )
    async with running_server(config) as bound, AsyncEvaldClient(bound) as client:
        await client.upload_dataset(
            name="few",
            version="1.0.0",
            task_type="classification",
            records=classification_records(3, prefix="c"),
        )
        first = await client.create_run(models=["sim-slow"], datasets=[("few", "1.0.0")])
        with pytest.raises(ResourceExhausted) as info:
            await client.create_run(models=["sim-slow"], datasets=[("few", "1.0.0")])
        assert info.value.reason == "LIMIT_EXCEEDED"
        assert info.value.metadata["limit"] == "max_runs_in_flight_per_tenant"
        assert info.value.metadata["limitValue"] == "1"
        await client.cancel_run(first.run_id)
        assert (await client.wait(first.run_id, timeout_s=20)).state is RunState.CANCELLED
        second = await client.create_run(models=["sim-slow"], datasets=[("few", "1.0.0")])
        await client.cancel_run(second.run_id)


async def test_runs_in_flight_per_tenant_hold_under_a_concurrent_burst(tmp_path: Path) -> None:
    """40 CreateRun at once against a cap of 3: exactly 3 runs exist afterwards (the
    count is taken inside the create transaction, not before it)."""
    cap, burst = 3, 40
    config = make_config(
        tmp_path,
        models=[simulated_model("sim-slow", latency_ms=5_000, max_concurrency=1)],
        limits={"max_runs_in_flight_per_tenant": cap},
    )
    async with running_server(config) as bound, AsyncEvaldClient(bound) as client:
        await client.upload_dataset(
            name="few",
            version="1.0.0",
            task_type="classification",
            records=classification_records(2, prefix="c"),
        )
        created: list[str] = []
        refused: list[ResourceExhausted] = []

        async def create() -> None:
            try:
                run = await client.create_run(models=["sim-slow"], datasets=[("few", "1.0.0")])
            except ResourceExhausted as error:
                refused.append(error)
            else:
                created.append(run.run_id)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for _ in range(burst):
                    group.start_soon(create)
        stored = [run async for run in client.list_runs()]
        assert (len(created), len(refused), len(stored)) == (cap, burst - cap, cap)
        assert {e.metadata["limit"] for e in refused} == {"max_runs_in_flight_per_tenant"}
        for run_id in created:
            await client.cancel_run(run_id)
