"""A small, scriptable EvaluationService for the SDK's and CLI's unit tests.

It is built from the generated base class and served by a real grpc.aio server on
127.0.0.1 port 0 (in a background thread, so blocking clients and the CLI can call it
too). It keeps what it is given in memory; tests script failures with ``fail`` and
stream cuts with ``watch_cuts``. The end-to-end tests against the real server live with
the server.
"""

import hashlib
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import grpc
from anyio.from_thread import start_blocking_portal
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from evald.v1 import (
    dataset_pb2,
    enums_pb2,
    event_pb2,
    result_pb2,
    run_pb2,
    sample_pb2,
    service_pb2,
    service_pb2_grpc,
)
from tests.client import _protos

_TERMINAL = (
    enums_pb2.RUN_STATE_SUCCEEDED,
    enums_pb2.RUN_STATE_PARTIAL,
    enums_pb2.RUN_STATE_FAILED,
    enums_pb2.RUN_STATE_CANCELLED,
)


@dataclass
class Failure:
    """A rich error status to answer with."""

    code: grpc.StatusCode
    message: str
    reason: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    violations: tuple[tuple[str, str], ...] = ()
    retry_after_s: float | None = None
    raw_details: bytes | None = None  # sent as is instead of a Status (malformed on purpose)

    def trailers(self) -> tuple[tuple[str, bytes], ...]:
        if self.raw_details is not None:
            return (("grpc-status-details-bin", self.raw_details),)
        details: list[any_pb2.Any] = []
        if self.reason:
            info = error_details_pb2.ErrorInfo(
                reason=self.reason, domain="evald", metadata=self.metadata
            )
            details.append(_pack(info))
        if self.violations:
            bad = error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=f, description=d)
                    for f, d in self.violations
                ]
            )
            details.append(_pack(bad))
        if self.retry_after_s is not None:
            retry = error_details_pb2.RetryInfo()
            retry.retry_delay.FromNanoseconds(int(self.retry_after_s * 1e9))
            details.append(_pack(retry))
        if not details:
            return ()
        status = status_pb2.Status(
            code=getattr(code_pb2, self.code.name), message=self.message, details=details
        )
        return (("grpc-status-details-bin", status.SerializeToString()),)


def _pack(message: Any) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


@dataclass
class WatchCut:
    """Cut the n-th WatchRun call with ``code`` after ``after_events`` events (CANCELLED:
    how a server that stops with the stream open ends it); ``rewind`` replays that many
    already-sent events on the next call (a sloppy server)."""

    after_events: int
    rewind: int = 0
    code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE


class FakeEvaluationService(service_pb2_grpc.EvaluationServiceServicer):
    def __init__(self) -> None:
        self.models = [_protos.model("sim-a"), _protos.model("sim-b")]
        self.datasets: list[dataset_pb2.Dataset] = []
        self.runs: dict[str, run_pb2.Run] = {}
        self.events: dict[str, list[event_pb2.RunEvent]] = {}
        self.results: dict[str, list[result_pb2.TaskEvaluationResult]] = {}
        self.samples: dict[str, list[sample_pb2.Sample]] = {}
        self.fail: dict[str, Failure] = {}  # RPC name → the error it answers with
        self.token: str | None = None  # when set, every call must carry it
        self.watch_cuts: list[WatchCut] = []  # consumed one per WatchRun call
        self.watch_requests: list[tuple[str, int]] = []
        self.end_watch_early = False  # end the stream OK before the terminal event
        self.uploads: list[tuple[dataset_pb2.UploadDatasetHeader, list[int], bytes]] = []
        self.created: list[service_pb2.CreateRunRequest] = []
        self.page_requests: list[tuple[str, int, str]] = []
        self.last_metadata: dict[str, str] = {}
        self._rewind = 0  # set by the previous call's WatchCut

    def add_run(
        self,
        run: run_pb2.Run,
        *,
        events: list[event_pb2.RunEvent] | None = None,
        samples: list[sample_pb2.Sample] | None = None,
    ) -> None:
        self.runs[run.run_id] = run
        self.events[run.run_id] = events if events is not None else _protos.event_log(run.run_id)
        self.results[run.run_id] = [
            e.task_scored.result for e in self.events[run.run_id] if e.HasField("task_scored")
        ]
        self.samples[run.run_id] = samples or []

    async def _check(self, name: str, context: grpc.aio.ServicerContext) -> None:
        self.last_metadata = {k: str(v) for k, v in context.invocation_metadata() or ()}
        if self.token is not None and self.last_metadata.get("authorization") != (
            f"Bearer {self.token}"
        ):
            await context.abort(
                grpc.StatusCode.UNAUTHENTICATED,
                "missing or unknown token",
                trailing_metadata=Failure(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "missing or unknown token",
                    reason="UNAUTHENTICATED",
                ).trailers(),
            )
        failure = self.fail.get(name)
        if failure is not None:
            await context.abort(failure.code, failure.message, trailing_metadata=failure.trailers())

    async def _run(self, run_id: str, context: grpc.aio.ServicerContext) -> run_pb2.Run:
        if run_id not in self.runs:
            failure = Failure(
                grpc.StatusCode.NOT_FOUND,
                f"run {run_id!r} not found",
                reason="RUN_NOT_FOUND",
                metadata={"run_id": run_id},
            )
            await context.abort(failure.code, failure.message, trailing_metadata=failure.trailers())
        return self.runs[run_id]

    def _page(self, name: str, items: list[Any], size: int, token: str) -> tuple[list[Any], str]:
        self.page_requests.append((name, size, token))
        start = int(token or 0)
        size = size or 3
        end = start + size
        return items[start:end], (str(end) if end < len(items) else "")

    async def ListModels(self, request: Any, context: Any) -> service_pb2.ListModelsResponse:
        await self._check("ListModels", context)
        return service_pb2.ListModelsResponse(models=self.models)

    async def UploadDataset(self, request_iterator: AsyncIterator[Any], context: Any) -> Any:
        await self._check("UploadDataset", context)
        header: dataset_pb2.UploadDatasetHeader | None = None
        sizes: list[int] = []
        content = bytearray()
        async for message in request_iterator:
            if message.HasField("header"):
                header = message.header
            else:
                sizes.append(len(message.chunk))
                content += message.chunk
                failure = self.fail.get("UploadDataset.chunk")
                if failure is not None:
                    # As evald's servicer does: read what the client is still sending
                    # (bounded), or grpc may end its writes with its own INTERNAL.
                    with anyio.move_on_after(2.0):
                        async for _ in request_iterator:
                            pass
                    await context.abort(
                        failure.code, failure.message, trailing_metadata=failure.trailers()
                    )
        assert header is not None
        self.uploads.append((header, sizes, bytes(content)))
        dataset = dataset_pb2.Dataset(
            dataset_id=f"d-{len(self.datasets) + 1}",
            name=header.name,
            benchmark_version=header.benchmark_version,
            task_type=header.task_type,
            record_count=content.count(b"\n"),
            content_sha256=hashlib.sha256(content).hexdigest(),
            prompt_template=header.prompt_template,
            created_time=_protos.stamp(),
            size_bytes=len(content),
        )
        self.datasets.append(dataset)
        return service_pb2.UploadDatasetResponse(dataset=dataset, created=True)

    async def GetDataset(self, request: Any, context: Any) -> Any:
        await self._check("GetDataset", context)
        for dataset in self.datasets:
            if request.dataset_id == dataset.dataset_id or (
                request.ref.name == dataset.name
                and request.ref.benchmark_version == dataset.benchmark_version
            ):
                return service_pb2.GetDatasetResponse(dataset=dataset)
        await context.abort(grpc.StatusCode.NOT_FOUND, "no such dataset")
        return None

    async def ListDatasets(self, request: Any, context: Any) -> Any:
        await self._check("ListDatasets", context)
        items = [d for d in self.datasets if not request.name or d.name == request.name]
        page, token = self._page("ListDatasets", items, request.page_size, request.page_token)
        return service_pb2.ListDatasetsResponse(datasets=page, next_page_token=token)

    async def CreateRun(self, request: Any, context: Any) -> Any:
        await self._check("CreateRun", context)
        self.created.append(request)
        run_id = f"r-{len(self.runs) + 1}"
        run = run_pb2.Run(
            run_id=run_id,
            spec=request.spec,
            state=enums_pb2.RUN_STATE_PENDING,
            created_time=_protos.stamp(),
            request_id=request.request_id,
        )
        self.add_run(run, events=_protos.event_log(run_id))
        return service_pb2.CreateRunResponse(run=run)

    async def GetRun(self, request: Any, context: Any) -> Any:
        await self._check("GetRun", context)
        return service_pb2.GetRunResponse(run=await self._run(request.run_id, context))

    async def ListRuns(self, request: Any, context: Any) -> Any:
        await self._check("ListRuns", context)
        items = [r for r in self.runs.values() if not request.states or r.state in request.states]
        page, token = self._page("ListRuns", items, request.page_size, request.page_token)
        return service_pb2.ListRunsResponse(runs=page, next_page_token=token)

    async def CancelRun(self, request: Any, context: Any) -> Any:
        await self._check("CancelRun", context)
        run = await self._run(request.run_id, context)
        run.state = enums_pb2.RUN_STATE_CANCELLED
        return service_pb2.CancelRunResponse(run=run)

    async def RetryRun(self, request: Any, context: Any) -> Any:
        await self._check("RetryRun", context)
        run = await self._run(request.run_id, context)
        return service_pb2.RetryRunResponse(run=run, requeued=len(request.task_ids) + 2)

    async def WatchRun(self, request: Any, context: Any) -> AsyncIterator[Any]:
        await self._check("WatchRun", context)
        await self._run(request.run_id, context)
        self.watch_requests.append((request.run_id, request.after_seq))
        cut = self.watch_cuts.pop(0) if self.watch_cuts else None
        rewind, self._rewind = self._rewind, (cut.rewind if cut else 0)
        log = self.events[request.run_id]
        pending = [e for e in log if e.seq > request.after_seq - rewind]
        if pending:
            yield service_pb2.WatchRunResponse(
                event=_protos.heartbeat(request.run_id, pending[0].seq - 1)
            )
        for sent, event in enumerate(pending):
            if cut is not None and sent == cut.after_events:
                if cut.code is not grpc.StatusCode.UNAVAILABLE:
                    await context.abort(cut.code, cut.code.name)
                await context.abort(
                    grpc.StatusCode.UNAVAILABLE,
                    "connection reset",
                    trailing_metadata=Failure(
                        grpc.StatusCode.UNAVAILABLE,
                        "connection reset",
                        reason="SERVER_DRAINING",
                        retry_after_s=0.01,
                    ).trailers(),
                )
            if self.end_watch_early and event.state_changed.state in _TERMINAL:
                return
            if event.state_changed.state in _TERMINAL:  # GetRun agrees with the stream
                self.runs[request.run_id].state = event.state_changed.state
            yield service_pb2.WatchRunResponse(event=event)

    async def ListResults(self, request: Any, context: Any) -> Any:
        await self._check("ListResults", context)
        await self._run(request.run_id, context)
        items = self.results[request.run_id]
        page, token = self._page("ListResults", items, request.page_size, request.page_token)
        return service_pb2.ListResultsResponse(results=page, next_page_token=token)

    async def ListSamples(self, request: Any, context: Any) -> Any:
        await self._check("ListSamples", context)
        await self._run(request.run_id, context)
        items = [
            s
            for s in self.samples[request.run_id]
            if (not request.task_id or s.task_id == request.task_id)
            and (not request.states or s.state in request.states)
        ]
        page, token = self._page("ListSamples", items, request.page_size, request.page_token)
        return service_pb2.ListSamplesResponse(samples=page, next_page_token=token)


@contextmanager
def serve_fake(servicer: FakeEvaluationService) -> Iterator[str]:
    """Serve ``servicer`` on 127.0.0.1 port 0 in a background thread; yields the address."""

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        service_pb2_grpc.add_EvaluationServiceServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    with start_blocking_portal(backend="asyncio") as portal:
        server, port = portal.call(start)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            portal.call(server.stop, None)
