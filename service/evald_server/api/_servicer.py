"""``evald.v1.EvaluationService``: a thin servicer that maps proto ⇄ domain and nothing else.

Authentication, draining and error mapping happen in ``_handlers``; validation and
every decision happen in the application layer (``evald_server.app``).
"""

from collections.abc import AsyncIterator
from typing import Any, TypeAlias

import anyio

from evald.v1 import service_pb2, service_pb2_grpc
from evald_server.api._auth import TokenAuthenticator
from evald_server.api._convert_app import (
    dataset_to_proto,
    event_to_proto,
    header_from_proto,
    model_to_proto,
    rescore_settings_from_proto,
    run_to_proto,
    sample_to_proto,
    spec_from_proto,
)
from evald_server.api._convert_comparison import comparison_to_proto, model_pairs_from_proto
from evald_server.api._convert_enums import from_proto_enum
from evald_server.api._convert_results import evaluation_to_proto
from evald_server.api._handlers import server_draining, server_stream, unary
from evald_server.app import DatasetRef, Evald, RunEvent
from evald_server.config import ServerConfig
from evald_server.domain import (
    DatasetInvalid,
    ErrorCategory,
    ErrorReason,
    EvaldError,
    FieldViolation,
    InvalidArgument,
    RunState,
    SubtaskState,
    TaskType,
    field_error,
)

# grpc.aio.ServicerContext; grpcio ships no type information, so it is Any to mypy.
Context: TypeAlias = Any


async def _discard_rest(request_iterator: AsyncIterator[Any], limit_s: float = 2.0) -> None:
    """Read what a client is still sending before answering an upload early.

    A client still writing when grpc.aio ends the call sees grpc's own INTERNAL
    ("Internal error from Core") instead of our status; reading on (bounded in time)
    lets it finish writing and receive the real error."""
    with anyio.move_on_after(limit_s):
        async for _ in request_iterator:
            pass


def _required(value: str, field: str) -> str:
    if not value:
        raise field_error(
            field,
            "must be set",
            f"{field} is required",
        )
    return value


def _enum_list(enum_type: Any, values: Any, field: str) -> list[Any]:
    members = []
    for value in values:
        member = from_proto_enum(enum_type, value)
        if member is None:
            raise field_error(
                field,
                f"unknown value {value}",
                f"{field}: unknown or unspecified value {value}",
            )
        members.append(member)
    return members


def _in_header(field: str) -> str:
    """The app names header fields bare (``name``); in the request they are ``header.name``."""
    return field if field.split(".")[0] == "header" else f"header.{field}"


class EvaluationServicer(service_pb2_grpc.EvaluationServiceServicer):
    def __init__(self, app: Evald, authenticator: TokenAuthenticator, config: ServerConfig) -> None:
        self.app = app
        self.authenticator = authenticator
        self.config = config
        self.draining = False
        self._watch_waits: set[anyio.CancelScope] = set()

    def begin_drain(self) -> None:
        """Refuse new calls, and end open watches with SERVER_DRAINING: a live run's watch
        never ends by itself, and its client should resume elsewhere, not wait out the
        grace period and then lose the stream without a status."""
        self.draining = True
        for scope in tuple(self._watch_waits):
            scope.cancel()

    async def _next_event(self, events: AsyncIterator[RunEvent]) -> RunEvent | None:
        """The next event, None at the end; ``ServerDraining`` once the drain begins."""
        with anyio.CancelScope() as scope:
            if not self.draining:
                self._watch_waits.add(scope)
                try:
                    return await anext(events, None)
                finally:
                    self._watch_waits.discard(scope)
        raise server_draining()

    # -- models and datasets -------------------------------------------------------------

    @unary
    async def ListModels(
        self, request: service_pb2.ListModelsRequest, context: Context, tenant: str
    ) -> service_pb2.ListModelsResponse:
        # The contract lists them sorted by model_id; the config keeps its own order.
        models = sorted(self.app.models, key=lambda m: m.model_id)
        return service_pb2.ListModelsResponse(models=[model_to_proto(m) for m in models])

    @unary
    async def UploadDataset(
        self,
        request_iterator: AsyncIterator[service_pb2.UploadDatasetRequest],
        context: Context,
        tenant: str,
    ) -> service_pb2.UploadDatasetResponse:
        try:
            return await self._upload(request_iterator, tenant)
        except EvaldError:
            await _discard_rest(request_iterator)
            raise

    async def _upload(
        self, request_iterator: AsyncIterator[service_pb2.UploadDatasetRequest], tenant: str
    ) -> service_pb2.UploadDatasetResponse:
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("content") != "header":
            raise field_error(
                "header",
                "must come first",
                "the first UploadDatasetRequest must carry the header",
                reason=ErrorReason.DATASET_HEADER_INVALID,
            )
        header = header_from_proto(first.header)
        expected = first.header.content_length if first.header.HasField("content_length") else None

        async def chunks() -> AsyncIterator[bytes]:
            received = 0
            async for message in request_iterator:
                if message.WhichOneof("content") != "chunk":
                    raise field_error(
                        "header",
                        "only in the first message",
                        "only the first UploadDatasetRequest may carry a header",
                        reason=ErrorReason.DATASET_HEADER_INVALID,
                    )
                received += len(message.chunk)
                yield message.chunk
            # grpc.aio ends the stream cleanly when a client is cut off mid-upload; only
            # the declared length tells a complete upload from a truncated one.
            if expected is not None and received != expected:
                raise DatasetInvalid(
                    ErrorReason.DATASET_UPLOAD_INCOMPLETE,
                    f"received {received} of the {expected} bytes the header announced",
                    metadata={"expectedBytes": expected, "receivedBytes": received},
                )

        try:
            dataset, created = await self.app.datasets.upload(tenant, header, chunks())
        except EvaldError as error:
            if error.reason is ErrorReason.DATASET_HEADER_INVALID:
                error.with_field_paths(_in_header)
            raise
        return service_pb2.UploadDatasetResponse(dataset=dataset_to_proto(dataset), created=created)

    @unary
    async def GetDataset(
        self, request: service_pb2.GetDatasetRequest, context: Context, tenant: str
    ) -> service_pb2.GetDatasetResponse:
        which = request.WhichOneof("dataset")
        if which == "dataset_id":
            dataset = await self.app.datasets.get(tenant, dataset_id=request.dataset_id)
        elif which == "ref":
            ref = DatasetRef(request.ref.name, request.ref.benchmark_version)
            dataset = await self.app.datasets.get(tenant, ref=ref)
        else:
            _required("", "dataset_id or ref")
        return service_pb2.GetDatasetResponse(dataset=dataset_to_proto(dataset))

    @unary
    async def ListDatasets(
        self, request: service_pb2.ListDatasetsRequest, context: Context, tenant: str
    ) -> service_pb2.ListDatasetsResponse:
        page = await self.app.datasets.list(
            tenant,
            page_size=request.page_size,
            page_token=request.page_token,
            name=request.name or None,
            task_type=from_proto_enum(TaskType, request.task_type),
        )
        return service_pb2.ListDatasetsResponse(
            datasets=[dataset_to_proto(d) for d in page.items],
            next_page_token=page.next_page_token,
        )

    # -- runs ----------------------------------------------------------------------------

    @unary
    async def CreateRun(
        self, request: service_pb2.CreateRunRequest, context: Context, tenant: str
    ) -> service_pb2.CreateRunResponse:
        spec = spec_from_proto(request.spec)
        run = await self.app.runs.create(tenant, spec, request.request_id or None)
        return service_pb2.CreateRunResponse(run=run_to_proto(run))

    @unary
    async def GetRun(
        self, request: service_pb2.GetRunRequest, context: Context, tenant: str
    ) -> service_pb2.GetRunResponse:
        run = await self.app.runs.get(tenant, _required(request.run_id, "run_id"))
        return service_pb2.GetRunResponse(run=run_to_proto(run))

    @unary
    async def ListRuns(
        self, request: service_pb2.ListRunsRequest, context: Context, tenant: str
    ) -> service_pb2.ListRunsResponse:
        page = await self.app.runs.list(
            tenant,
            page_size=request.page_size,
            page_token=request.page_token,
            states=_enum_list(RunState, request.states, "states"),
        )
        return service_pb2.ListRunsResponse(
            runs=[run_to_proto(r) for r in page.items], next_page_token=page.next_page_token
        )

    @unary
    async def CancelRun(
        self, request: service_pb2.CancelRunRequest, context: Context, tenant: str
    ) -> service_pb2.CancelRunResponse:
        run = await self.app.runs.cancel(tenant, _required(request.run_id, "run_id"))
        return service_pb2.CancelRunResponse(run=run_to_proto(run))

    @unary
    async def RetryRun(
        self, request: service_pb2.RetryRunRequest, context: Context, tenant: str
    ) -> service_pb2.RetryRunResponse:
        run, requeued = await self.app.runs.retry(
            tenant,
            _required(request.run_id, "run_id"),
            task_ids=tuple(request.task_ids),
            categories=_enum_list(ErrorCategory, request.categories, "categories"),
            reasons=_enum_list(ErrorReason, request.reasons, "reasons"),
            states=_enum_list(SubtaskState, request.states, "states"),
        )
        return service_pb2.RetryRunResponse(run=run_to_proto(run), requeued=requeued)

    @server_stream
    async def WatchRun(
        self, request: service_pb2.WatchRunRequest, context: Context, tenant: str
    ) -> AsyncIterator[service_pb2.WatchRunResponse]:
        if request.after_seq < 0:
            raise InvalidArgument(
                ErrorReason.INVALID_ARGUMENT,
                f"after_seq must not be negative, got {request.after_seq}",
                field_violations=(FieldViolation("after_seq", "must not be negative"),),
            )
        events = await self.app.runs.watch(
            tenant, _required(request.run_id, "run_id"), request.after_seq
        )
        while (event := await self._next_event(events)) is not None:
            yield service_pb2.WatchRunResponse(event=event_to_proto(event))

    @unary
    async def ListResults(
        self, request: service_pb2.ListResultsRequest, context: Context, tenant: str
    ) -> service_pb2.ListResultsResponse:
        page = await self.app.runs.results(
            tenant,
            _required(request.run_id, "run_id"),
            task_ids=tuple(request.task_ids),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return service_pb2.ListResultsResponse(
            results=[evaluation_to_proto(e) for e in page.items],
            next_page_token=page.next_page_token,
        )

    @unary
    async def ListSamples(
        self, request: service_pb2.ListSamplesRequest, context: Context, tenant: str
    ) -> service_pb2.ListSamplesResponse:
        page = await self.app.runs.samples(
            tenant,
            _required(request.run_id, "run_id"),
            task_id=request.task_id or None,
            states=_enum_list(SubtaskState, request.states, "states"),
            page_size=request.page_size,
            page_token=request.page_token,
        )
        return service_pb2.ListSamplesResponse(
            samples=[sample_to_proto(s) for s in page.items],
            next_page_token=page.next_page_token,
        )

    @unary
    async def RescoreRun(
        self, request: service_pb2.RescoreRunRequest, context: Context, tenant: str
    ) -> service_pb2.RescoreRunResponse:
        run = await self.app.runs.rescore(
            tenant,
            _required(request.run_id, "run_id"),
            rescore_settings_from_proto(request.settings),
            name=request.name,
            request_id=request.request_id or None,
        )
        return service_pb2.RescoreRunResponse(run=run_to_proto(run))

    @unary
    async def CompareRuns(
        self, request: service_pb2.CompareRunsRequest, context: Context, tenant: str
    ) -> service_pb2.CompareRunsResponse:
        comparison = await self.app.comparisons.compare(
            tenant,
            request.baseline_run_id,
            request.candidate_run_id,
            model_pairs=model_pairs_from_proto(request.model_pairs),
            resamples=request.resamples,
            permutations=request.permutations,
            seed=request.seed,
        )
        return service_pb2.CompareRunsResponse(comparison=comparison_to_proto(comparison))
