"""gRPC statuses with rich details become the SDK's exception tree (and nothing else)."""

import grpc
import pytest

import evald_client as ec
from tests.client import _protos
from tests.client._servicer import Failure, FakeEvaluationService

SC = grpc.StatusCode


@pytest.mark.parametrize(
    ("code", "reason", "expected"),
    [
        (SC.INVALID_ARGUMENT, "RUN_SPEC_INVALID", ec.InvalidArgument),
        (SC.INVALID_ARGUMENT, "DATASET_PARSE_ERROR", ec.DatasetInvalid),
        (SC.NOT_FOUND, "RUN_NOT_FOUND", ec.NotFound),
        (SC.ALREADY_EXISTS, "DATASET_VERSION_CONFLICT", ec.AlreadyExists),
        (SC.FAILED_PRECONDITION, "RUN_NOT_RETRYABLE", ec.FailedPrecondition),
        (SC.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED", ec.ResourceExhausted),
        (SC.OUT_OF_RANGE, "WATCH_SEQ_EXPIRED", ec.OutOfRange),
        (SC.UNAUTHENTICATED, "UNAUTHENTICATED", ec.Unauthenticated),
        (SC.PERMISSION_DENIED, "", ec.PermissionDenied),
        (SC.UNAVAILABLE, "PROVIDER_HTTP_5XX", ec.ProviderError),
        (SC.DEADLINE_EXCEEDED, "PROVIDER_TIMEOUT", ec.ProviderError),
        (SC.UNAVAILABLE, "SERVER_DRAINING", ec.Unavailable),
        (SC.DEADLINE_EXCEEDED, "", ec.DeadlineExceeded),
        (SC.INTERNAL, "INTERNAL_ERROR", ec.InternalError),
        (SC.UNKNOWN, "", ec.InternalError),
        (SC.UNIMPLEMENTED, "", ec.InternalError),
        (SC.CANCELLED, "", ec.EvaldError),
    ],
)
@pytest.mark.anyio
async def test_status_maps_to_exception_class(
    servicer: FakeEvaluationService,
    address: str,
    code: grpc.StatusCode,
    reason: str,
    expected: type[ec.EvaldError],
) -> None:
    servicer.add_run(_protos.run("r-1"))
    servicer.fail["GetRun"] = Failure(code, "it went wrong", reason=reason, metadata={"k": "v"})
    async with ec.AsyncEvaldClient(address) as client:
        with pytest.raises(ec.EvaldError) as info:
            await client.get_run("r-1")
    error = info.value
    assert type(error) is expected
    assert error.code == code.name
    assert error.reason == (reason or code.name)
    assert error.message == "it went wrong"
    assert isinstance(error.__cause__, grpc.RpcError)
    if reason:
        assert error.domain == "evald"
        assert dict(error.metadata) == {"k": "v"}


@pytest.mark.anyio
async def test_not_found_names_the_run_in_one_line(address: str) -> None:
    async with ec.AsyncEvaldClient(address) as client:
        with pytest.raises(ec.NotFound) as info:
            await client.get_run("r-x")
    assert str(info.value) == "NOT_FOUND RUN_NOT_FOUND: run 'r-x' not found"
    assert info.value.metadata["run_id"] == "r-x"


@pytest.mark.anyio
async def test_field_violations_and_retry_info_are_unpacked(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.fail["CreateRun"] = Failure(
        SC.INVALID_ARGUMENT,
        "the run spec is invalid",
        reason="RUN_SPEC_INVALID",
        violations=(("spec.max_concurrency", "must be >= 1"), ("spec.model_ids", "empty")),
        retry_after_s=1.5,
    )
    async with ec.AsyncEvaldClient(address) as client:
        with pytest.raises(ec.InvalidArgument) as info:
            await client.create_run(models=[], datasets=[("d", "1")], max_concurrency=0)
    error = info.value
    assert error.field_violations == (
        ec.FieldViolation("spec.max_concurrency", "must be >= 1"),
        ec.FieldViolation("spec.model_ids", "empty"),
    )
    assert error.retry_after == pytest.approx(1.5)
    assert "spec.max_concurrency: must be >= 1" in str(error)


@pytest.mark.anyio
@pytest.mark.parametrize("raw", [None, b"\xff\x00 not a status"])
async def test_missing_or_malformed_details_still_map_by_code(
    servicer: FakeEvaluationService, address: str, raw: bytes | None
) -> None:
    servicer.fail["ListModels"] = Failure(SC.RESOURCE_EXHAUSTED, "too many", raw_details=raw)
    async with ec.AsyncEvaldClient(address) as client:
        with pytest.raises(ec.ResourceExhausted) as info:
            await client.list_models()
    assert info.value.reason == "RESOURCE_EXHAUSTED"
    assert info.value.field_violations == ()
    assert info.value.retry_after is None


@pytest.mark.anyio
async def test_bearer_token_is_sent_and_a_wrong_one_is_unauthenticated(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.token = "s3cret"
    async with ec.AsyncEvaldClient(address, token="s3cret") as client:
        assert [m.model_id for m in await client.list_models()] == ["sim-a", "sim-b"]
    assert servicer.last_metadata["authorization"] == "Bearer s3cret"
    async with ec.AsyncEvaldClient(address, token="wrong") as client:
        with pytest.raises(ec.Unauthenticated, match="UNAUTHENTICATED: missing or unknown"):
            await client.list_models()


@pytest.mark.anyio
async def test_unreachable_server_is_unavailable_not_a_grpc_error() -> None:
    # Port 1 on loopback: nothing listens there, the connection is refused at once.
    async with ec.AsyncEvaldClient("127.0.0.1:1", timeout_s=5) as client:
        with pytest.raises(ec.Unavailable) as info:
            await client.list_models()
    assert isinstance(info.value.__cause__, grpc.RpcError)


def test_every_exception_derives_from_one_base() -> None:
    for name in ec.__all__:
        obj = getattr(ec, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, ec.EvaldError)
    assert issubclass(ec.DatasetInvalid, ec.InvalidArgument)
