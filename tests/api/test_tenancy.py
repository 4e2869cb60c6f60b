"""Tenants and tokens: another tenant's objects are NOT_FOUND on every RPC, exactly as
objects that do not exist, and never listed; a missing, malformed or unknown token is
UNAUTHENTICATED on unary and streaming RPCs; health and reflection need no token."""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from evald.v1 import dataset_pb2, enums_pb2, run_pb2, service_pb2
from evald_client import AsyncEvaldClient, NotFound, RunState, Unauthenticated
from tests._shared import classification_records, jsonl, simulated_model
from tests.api._support import (
    Metadata,
    RpcFailure,
    assert_reason,
    bearer,
    chunk,
    fails,
    header,
    health_status,
    raw_stub,
    reflected_services,
    stream_fails,
)
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

TOKENS = {"acme": "tok-acme-3f9a", "beta": "tok-beta-77c1"}
A = bearer(TOKENS["acme"])
B = bearer(TOKENS["beta"])
SERVICE = "evald.v1.EvaluationService"


@dataclass(frozen=True)
class World:
    address: str
    dataset_id: str
    run_id: str
    task_id: str


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    """Tenant acme owns a dataset "secret" 1.0.0 and a finished run on it."""
    config = make_config(
        tmp_path_factory.mktemp("tenancy"),
        models=[simulated_model("sim-a", accuracy=0.5)],
        tokens=TOKENS,
    )
    async with (
        running_server(config) as address,
        AsyncEvaldClient(address, token=TOKENS["acme"]) as acme,
    ):
        dataset = await acme.upload_dataset(
            name="secret",
            version="1.0.0",
            task_type="classification",
            records=classification_records(5, prefix="c"),
        )
        run = await acme.create_run(models=["sim-a"], datasets=[("secret", "1.0.0")])
        finished = await acme.wait(run.run_id, timeout_s=30)
        assert finished.state is RunState.SUCCEEDED
        yield World(address, dataset.dataset_id, run.run_id, finished.progress.tasks[0].task_id)


def _same_failure(theirs: RpcFailure, missing: RpcFailure, their_id: str, bogus: str) -> None:
    """Another tenant's id fails exactly as an id that never existed."""
    assert theirs.code is grpc.StatusCode.NOT_FOUND
    assert (theirs.code, theirs.reason, theirs.domain) == (
        missing.code,
        missing.reason,
        missing.domain,
    )
    assert theirs.message.replace(their_id, "X") == missing.message.replace(bogus, "X")
    assert {k: v.replace(their_id, "X") for k, v in theirs.metadata.items()} == {
        k: v.replace(bogus, "X") for k, v in missing.metadata.items()
    }


async def test_other_tenants_run_is_not_found_on_every_run_rpc(world: World) -> None:
    bogus = "run_0123456789abcdef"
    async with raw_stub(world.address) as stub:
        # The owner can do all of it.
        await stub.GetRun(service_pb2.GetRunRequest(run_id=world.run_id), metadata=A)
        calls: dict[str, Any] = {
            "GetRun": lambda run_id, md: stub.GetRun(
                service_pb2.GetRunRequest(run_id=run_id), metadata=md
            ),
            "CancelRun": lambda run_id, md: stub.CancelRun(
                service_pb2.CancelRunRequest(run_id=run_id), metadata=md
            ),
            "RetryRun": lambda run_id, md: stub.RetryRun(
                service_pb2.RetryRunRequest(run_id=run_id), metadata=md
            ),
            "RescoreRun": lambda run_id, md: stub.RescoreRun(
                service_pb2.RescoreRunRequest(run_id=run_id), metadata=md
            ),
            "ListResults": lambda run_id, md: stub.ListResults(
                service_pb2.ListResultsRequest(run_id=run_id), metadata=md
            ),
            "ListSamples": lambda run_id, md: stub.ListSamples(
                service_pb2.ListSamplesRequest(run_id=run_id), metadata=md
            ),
            "ListSamples(task_id)": lambda run_id, md: stub.ListSamples(
                service_pb2.ListSamplesRequest(run_id=run_id, task_id=world.task_id), metadata=md
            ),
        }
        for call in calls.values():
            theirs = await fails(call(world.run_id, B))
            missing = await fails(call(bogus, B))
            assert_reason(theirs, grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND")
            _same_failure(theirs, missing, world.run_id, bogus)

        for after_seq in (0, 1):
            request = service_pb2.WatchRunRequest(run_id=world.run_id, after_seq=after_seq)
            received, theirs = await stream_fails(stub.WatchRun(request, metadata=B))
            assert received == []
            request = service_pb2.WatchRunRequest(run_id=bogus, after_seq=after_seq)
            _, missing = await stream_fails(stub.WatchRun(request, metadata=B))
            assert_reason(theirs, grpc.StatusCode.NOT_FOUND, "RUN_NOT_FOUND")
            _same_failure(theirs, missing, world.run_id, bogus)

        # B's cancel did nothing to A's run.
        run = (await stub.GetRun(service_pb2.GetRunRequest(run_id=world.run_id), metadata=A)).run
        assert run.state == enums_pb2.RUN_STATE_SUCCEEDED


async def test_other_tenants_dataset_is_not_found_and_never_listed(world: World) -> None:
    ref = dataset_pb2.DatasetRef(name="secret", benchmark_version="1.0.0")
    async with raw_stub(world.address) as stub:
        bogus = "ds_0123456789abcdef"
        theirs = await fails(
            stub.GetDataset(service_pb2.GetDatasetRequest(dataset_id=world.dataset_id), metadata=B)
        )
        missing = await fails(
            stub.GetDataset(service_pb2.GetDatasetRequest(dataset_id=bogus), metadata=B)
        )
        assert_reason(theirs, grpc.StatusCode.NOT_FOUND, "DATASET_NOT_FOUND")
        _same_failure(theirs, missing, world.dataset_id, bogus)
        theirs = await fails(stub.GetDataset(service_pb2.GetDatasetRequest(ref=ref), metadata=B))
        assert_reason(theirs, grpc.StatusCode.NOT_FOUND, "DATASET_VERSION_NOT_FOUND")

        # B cannot run on A's dataset version ...
        spec = run_pb2.RunSpec(model_ids=["sim-a"], datasets=[ref])
        failure = await fails(stub.CreateRun(service_pb2.CreateRunRequest(spec=spec), metadata=B))
        assert_reason(
            failure,
            grpc.StatusCode.NOT_FOUND,
            "DATASET_VERSION_NOT_FOUND",
            name="secret",
            benchmarkVersion="1.0.0",
        )
        # ... and A's objects never show in B's listings, whatever the filters.
        for request in (
            service_pb2.ListDatasetsRequest(),
            service_pb2.ListDatasetsRequest(name="secret"),
            service_pb2.ListDatasetsRequest(task_type=enums_pb2.TASK_TYPE_CLASSIFICATION),
        ):
            listed = await stub.ListDatasets(request, metadata=B)
            assert list(listed.datasets) == []
        for runs_request in (
            service_pb2.ListRunsRequest(),
            service_pb2.ListRunsRequest(states=[enums_pb2.RUN_STATE_SUCCEEDED]),
        ):
            assert list((await stub.ListRuns(runs_request, metadata=B)).runs) == []

        # B's own "secret" 1.0.0 is another dataset: no conflict with A's version.
        own = await stub.UploadDataset(
            iter([header("secret"), chunk(jsonl(classification_records(3, prefix="b")))]),
            metadata=B,
        )
        assert own.created
        assert own.dataset.dataset_id != world.dataset_id
        listed_b = await stub.ListDatasets(service_pb2.ListDatasetsRequest(), metadata=B)
        assert [d.dataset_id for d in listed_b.datasets] == [own.dataset.dataset_id]
        listed_a = await stub.ListDatasets(service_pb2.ListDatasetsRequest(), metadata=A)
        assert world.dataset_id in {d.dataset_id for d in listed_a.datasets}
        assert own.dataset.dataset_id not in {d.dataset_id for d in listed_a.datasets}
        by_ref = await stub.GetDataset(service_pb2.GetDatasetRequest(ref=ref), metadata=B)
        assert by_ref.dataset.dataset_id == own.dataset.dataset_id


async def test_sdk_other_tenant_is_not_found(world: World) -> None:
    async with AsyncEvaldClient(world.address, token=TOKENS["beta"]) as beta:
        with pytest.raises(NotFound) as info:
            await beta.results(world.run_id)
        assert info.value.reason == "RUN_NOT_FOUND"
        with pytest.raises(NotFound):
            await beta.get_dataset(dataset_id=world.dataset_id)
        assert [r async for r in beta.list_runs()] == []


BAD_CREDENTIALS: dict[str, Metadata] = {
    "missing": (),
    "no_scheme": (("authorization", TOKENS["acme"]),),
    "basic_scheme": (("authorization", f"Basic {TOKENS['acme']}"),),
    "empty_bearer": (("authorization", "Bearer"),),
    "unknown_token": bearer("tok-nobody"),
    "token_with_suffix": bearer(TOKENS["acme"] + "x"),
}


@pytest.mark.parametrize("case", list(BAD_CREDENTIALS), ids=list(BAD_CREDENTIALS))
async def test_unauthenticated_on_unary_and_streaming_rpcs(world: World, case: str) -> None:
    metadata = BAD_CREDENTIALS[case]
    async with raw_stub(world.address) as stub:
        failures = [
            await fails(stub.ListModels(service_pb2.ListModelsRequest(), metadata=metadata)),
            await fails(
                stub.GetRun(service_pb2.GetRunRequest(run_id=world.run_id), metadata=metadata)
            ),
            await fails(
                stub.UploadDataset(
                    iter([header("sneaky"), chunk(jsonl(classification_records(2, prefix="c")))]),
                    metadata=metadata,
                )
            ),
        ]
        request = service_pb2.WatchRunRequest(run_id=world.run_id)
        received, failure = await stream_fails(stub.WatchRun(request, metadata=metadata))
        assert received == []
        failures.append(failure)
        for failure in failures:
            assert_reason(failure, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
            assert TOKENS["acme"] not in failure.message
        listed = await stub.ListDatasets(service_pb2.ListDatasetsRequest(name="sneaky"), metadata=A)
        assert list(listed.datasets) == []


async def test_bearer_scheme_is_case_insensitive(world: World) -> None:
    async with raw_stub(world.address) as stub:
        lower = (("authorization", f"bearer {TOKENS['acme']}"),)
        response = await stub.GetRun(service_pb2.GetRunRequest(run_id=world.run_id), metadata=lower)
        assert response.run.run_id == world.run_id


async def test_sdk_without_token_is_unauthenticated(world: World) -> None:
    async with AsyncEvaldClient(world.address) as anonymous:
        with pytest.raises(Unauthenticated) as info:
            await anonymous.list_models()
        assert info.value.reason == "UNAUTHENTICATED"
        with pytest.raises(Unauthenticated):
            async for _ in anonymous.watch(world.run_id):
                pass


async def test_health_and_reflection_need_no_token(world: World) -> None:
    assert await health_status(world.address) == "SERVING"
    assert await health_status(world.address, SERVICE) == "SERVING"
    services = await reflected_services(world.address)
    assert SERVICE in services
    assert "grpc.health.v1.Health" in services
