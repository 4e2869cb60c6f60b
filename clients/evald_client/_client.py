"""``AsyncEvaldClient``: the typed asyncio client of ``evald.v1.EvaluationService``."""

from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import grpc
from google.protobuf import json_format

from evald.v1 import dataset_pb2, run_pb2, service_pb2, service_pb2_grpc
from evald_client._channel import DEFAULT_MAX_MESSAGE_BYTES, TlsConfig, open_channel
from evald_client._comparison import ModelPair, RunComparison
from evald_client._convert_common import (
    category_to_proto,
    reason_to_proto,
    run_state_to_proto,
    subtask_state_to_proto,
    task_type_to_proto,
)
from evald_client._convert_comparison import comparison_from_proto, model_pair_to_proto
from evald_client._convert_requests import (
    budget_to_proto,
    choice_scoring_to_proto,
    dataset_options_to_proto,
    dataset_ref_to_proto,
    generation_to_proto,
    judge_options_to_proto,
    prompt_format_to_proto,
    prompt_to_proto,
    reducer_to_proto,
    retry_policy_to_proto,
)
from evald_client._convert_results import result_from_proto
from evald_client._convert_runs import (
    dataset_from_proto,
    model_from_proto,
    run_from_proto,
    sample_from_proto,
)
from evald_client._enums import (
    ChoiceScoring,
    ErrorCategory,
    PromptFormat,
    RunState,
    SubtaskState,
    TaskType,
)
from evald_client._errors import DeadlineExceeded, InternalError, error_from_rpc
from evald_client._events import RunEvent
from evald_client._models import (
    Budget,
    Dataset,
    DatasetOptions,
    DatasetRef,
    GenerationParams,
    JudgeOptions,
    Model,
    PromptOptions,
    Reducer,
    RetryOutcome,
    RetryPolicy,
    Run,
    Sample,
)
from evald_client._results import TaskResult
from evald_client._upload import (
    chunks_from_path,
    chunks_from_spool,
    send_upload,
    spool_records,
    spool_size,
)
from evald_client._watch import ReconnectPolicy, watch_events

DEFAULT_CHUNK_BYTES = 256 * 1024
DEFAULT_TIMEOUT_S = 60.0


class AsyncEvaldClient:
    """A client of one evald server, for asyncio code (grpc.aio underneath).

    ``timeout_s`` is the deadline of every call except ``watch`` (which lives as long as
    the run). Use as ``async with AsyncEvaldClient("127.0.0.1:50051") as client: …``,
    or call ``close()``. Every failure raises an ``EvaldError`` subclass.
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        tls: bool | TlsConfig = False,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        reconnect: ReconnectPolicy | None = None,
    ) -> None:
        self._target = target
        self._channel = open_channel(target, tls=tls, max_message_bytes=max_message_bytes)
        self._stub = service_pb2_grpc.EvaluationServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token else ()
        )
        self._timeout_s = timeout_s
        self._max_message_bytes = max_message_bytes
        self._reconnect = reconnect or ReconnectPolicy()

    @property
    def target(self) -> str:
        return self._target

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the channel; calls still in flight are cancelled."""
        await self._channel.close()

    async def _call(self, rpc: Any, request: Any) -> Any:
        try:
            return await rpc(request, metadata=self._metadata, timeout=self._timeout_s)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from exc

    async def _pages(self, rpc: Any, request: Any, items: str) -> AsyncGenerator[Any, None]:
        """Every item of every page; fails (rather than loops) if a token comes back."""
        seen: set[str] = set()
        while True:
            response = await self._call(rpc, request)
            for item in getattr(response, items):
                yield item
            token: str = response.next_page_token
            if not token:
                return
            if token in seen:
                raise InternalError(f"the server repeated page token {token!r}", code="INTERNAL")
            seen.add(token)
            request.page_token = token

    # -- models and datasets ----------------------------------------------------------------

    async def list_models(self) -> list[Model]:
        """The models runs may use, sorted by id."""
        response = await self._call(self._stub.ListModels, service_pb2.ListModelsRequest())
        return [model_from_proto(m) for m in response.models]

    async def upload_dataset(
        self,
        *,
        name: str,
        version: str,
        task_type: TaskType | str,
        path: Path | str | None = None,
        records: Iterable[Mapping[str, Any]] | None = None,
        prompt_template: str | None = None,
        request_id: str | None = None,
        chunk_bytes: int = DEFAULT_CHUNK_BYTES,
        prompt: PromptOptions | None = None,
    ) -> Dataset:
        """Upload a dataset version from a JSONL file (streamed as is) or from records.

        Exactly one of ``path`` and ``records`` is given. A bad record fails the whole
        upload with ``DatasetInvalid`` (metadata: line, field); nothing is stored. The
        same name, version and content again returns the stored dataset.
        """
        if (path is None) == (records is None):
            raise ValueError("upload_dataset: give exactly one of path and records")
        if not 1 <= chunk_bytes <= self._max_message_bytes - 1024:
            raise ValueError(f"chunk_bytes must be in 1..{self._max_message_bytes - 1024}")
        header = dataset_pb2.UploadDatasetHeader(
            name=name,
            benchmark_version=version,
            task_type=task_type_to_proto(TaskType(task_type)),
            request_id=request_id or "",
        )
        if prompt_template is not None:
            header.prompt_template = prompt_template
        if prompt is not None:
            header.prompt.CopyFrom(prompt_to_proto(prompt))
        # The declared length lets the server tell a complete upload from one cut off.
        if path is not None:
            header.content_length = (await anyio.Path(path).stat()).st_size
            chunks = chunks_from_path(Path(path), chunk_bytes)
        else:
            spool = await anyio.to_thread.run_sync(spool_records, records or ())
            header.content_length = spool_size(spool)
            chunks = chunks_from_spool(spool, chunk_bytes)
        call = self._stub.UploadDataset(metadata=self._metadata, timeout=self._timeout_s)
        response = await send_upload(call, header, chunks)
        return dataset_from_proto(response.dataset)

    async def get_dataset(
        self,
        *,
        dataset_id: str | None = None,
        name: str | None = None,
        version: str | None = None,
    ) -> Dataset:
        """One dataset version, by ``dataset_id`` or by ``name`` and ``version``."""
        if dataset_id is not None:
            request = service_pb2.GetDatasetRequest(dataset_id=dataset_id)
        elif name is not None and version is not None:
            ref = dataset_pb2.DatasetRef(name=name, benchmark_version=version)
            request = service_pb2.GetDatasetRequest(ref=ref)
        else:
            raise ValueError("get_dataset: give dataset_id, or name and version")
        response = await self._call(self._stub.GetDataset, request)
        return dataset_from_proto(response.dataset)

    async def list_datasets(
        self,
        *,
        name: str | None = None,
        task_type: TaskType | str | None = None,
        page_size: int = 0,
    ) -> AsyncGenerator[Dataset, None]:
        """Dataset versions, newest first, fetched page by page."""
        request = service_pb2.ListDatasetsRequest(page_size=page_size, name=name or "")
        if task_type is not None:
            request.task_type = task_type_to_proto(TaskType(task_type))
        async for item in self._pages(self._stub.ListDatasets, request, "datasets"):
            yield dataset_from_proto(item)

    # -- runs -------------------------------------------------------------------------------

    async def create_run(
        self,
        *,
        models: Sequence[str],
        datasets: Sequence[DatasetRef | tuple[str, str]],
        name: str = "",
        max_concurrency: int | None = None,
        repeat: int = 1,
        retry_policy: RetryPolicy | None = None,
        generation: GenerationParams | None = None,
        labels: Mapping[str, str] | None = None,
        request_id: str | None = None,
        dataset_options: Sequence[DatasetOptions] = (),
        prompt: PromptOptions | None = None,
        choice_scoring: ChoiceScoring | str | None = None,
        budget: Budget | None = None,
        judge: JudgeOptions | None = None,
        response_cache: bool = False,
        reducers: Sequence[Reducer | str] = (),
        prompt_format: PromptFormat | str | None = None,
    ) -> Run:
        """Submit a run of every model × every dataset version; returns it accepted.

        ``dataset_options`` set generation parameters, prompt options and choice
        scoring for single datasets (winning over ``generation``, ``prompt`` and
        ``choice_scoring``, which apply to every dataset of the run). ``budget`` caps
        what the run may spend (cost in USD, tokens). ``judge`` grades every answer with
        a judge model; ``response_cache`` answers from (and fills) the server's
        response cache. ``reducers`` (``Reducer`` or its spelling: ``"pass@5"``,
        ``"pass^3"``, ``"majority"``, ``"mean"``) are reported over each record's
        repeats by every task (``TaskResult.reduced``).
        response cache. ``prompt_format`` sends the prompts through the server's chat
        template (``chat``, the default) or as plain text to the completions endpoint
        (``plain``); loglikelihood choice scoring is always plain.
        """
        refs = [ref if isinstance(ref, DatasetRef) else DatasetRef(*ref) for ref in datasets]
        spec = run_pb2.RunSpec(
            name=name,
            model_ids=list(models),
            datasets=[dataset_ref_to_proto(ref) for ref in refs],
            repeat=repeat,
            labels=dict(labels or {}),
        )
        if max_concurrency is not None:
            spec.max_concurrency = max_concurrency
        if retry_policy is not None:
            spec.retry_policy.CopyFrom(retry_policy_to_proto(retry_policy))
        if generation is not None:
            spec.generation_overrides.CopyFrom(generation_to_proto(generation))
        spec.dataset_options.extend(dataset_options_to_proto(o) for o in dataset_options)
        if prompt is not None:
            spec.prompt.CopyFrom(prompt_to_proto(prompt))
        if choice_scoring is not None:
            spec.choice_scoring = choice_scoring_to_proto(ChoiceScoring(choice_scoring))
        if budget is not None:
            spec.budget.CopyFrom(budget_to_proto(budget))
        if judge is not None:
            spec.judge.CopyFrom(judge_options_to_proto(judge))
        spec.response_cache = response_cache
        spec.reducers.extend(
            reducer_to_proto(r if isinstance(r, Reducer) else Reducer.parse(r)) for r in reducers
        )
        if prompt_format is not None:
            spec.prompt_format = prompt_format_to_proto(PromptFormat(prompt_format))
        request = service_pb2.CreateRunRequest(spec=spec, request_id=request_id or "")
        response = await self._call(self._stub.CreateRun, request)
        return run_from_proto(response.run)

    async def get_run(self, run_id: str) -> Run:
        """The run's spec, state and progress now."""
        request = service_pb2.GetRunRequest(run_id=run_id)
        response = await self._call(self._stub.GetRun, request)
        return run_from_proto(response.run)

    async def list_runs(
        self, *, states: Iterable[RunState] = (), page_size: int = 0
    ) -> AsyncGenerator[Run, None]:
        """Runs, newest first, optionally only in some states, fetched page by page."""
        request = service_pb2.ListRunsRequest(
            page_size=page_size, states=[run_state_to_proto(s) for s in states]
        )
        async for item in self._pages(self._stub.ListRuns, request, "runs"):
            yield run_from_proto(item)

    async def cancel_run(self, run_id: str) -> Run:
        """Cancel the run (a terminal run is returned unchanged)."""
        request = service_pb2.CancelRunRequest(run_id=run_id)
        response = await self._call(self._stub.CancelRun, request)
        return run_from_proto(response.run)

    async def retry_run(
        self,
        run_id: str,
        *,
        task_ids: Iterable[str] = (),
        categories: Iterable[ErrorCategory] = (),
        reasons: Iterable[str] = (),
        states: Iterable[SubtaskState] = (),
    ) -> RetryOutcome:
        """Re-queue a terminal run's permanently failed samples, optionally only those of
        some tasks, error categories or reasons (``"PROVIDER_RATE_LIMITED"``, the names
        ``EvalError.reason`` carries). ``states`` picks ``FAILED_PERMANENT`` (the default)
        and/or ``CANCELLED``: retrying the cancelled samples resumes a cancelled run.
        An unknown reason name raises ``ValueError`` before anything is sent."""
        request = service_pb2.RetryRunRequest(
            run_id=run_id,
            task_ids=list(task_ids),
            categories=[category_to_proto(c) for c in categories],
            reasons=[reason_to_proto(r) for r in reasons],
            states=[subtask_state_to_proto(s) for s in states],
        )
        response = await self._call(self._stub.RetryRun, request)
        return RetryOutcome(run=run_from_proto(response.run), requeued=response.requeued)

    def watch(self, run_id: str, *, after_seq: int = 0) -> AsyncGenerator[RunEvent, None]:
        """The run's events with seq > ``after_seq``, then live, until its current terminal
        state: a run that ended and was retried or resumed is followed past its earlier
        end, as the server's stream goes on.

        Reconnects on UNAVAILABLE and resumes after the last event received (no gap,
        no duplicate). Breaking out of the loop cancels the stream.
        """

        def open_stream(request: service_pb2.WatchRunRequest) -> Any:
            return self._stub.WatchRun(request, metadata=self._metadata)

        async def run_is_terminal() -> bool:
            return (await self.get_run(run_id)).is_terminal

        return watch_events(open_stream, run_is_terminal, run_id, after_seq, self._reconnect)

    async def wait(self, run_id: str, *, timeout_s: float | None = None) -> Run:
        """Wait until the run is terminal and return it; ``DeadlineExceeded`` after
        ``timeout_s`` seconds if given."""
        try:
            with anyio.fail_after(timeout_s):
                run = await self.get_run(run_id)
                if run.is_terminal:
                    return run
                async with aclosing(self.watch(run_id, after_seq=run.last_seq)) as events:
                    async for _ in events:
                        pass
                return await self.get_run(run_id)
        except TimeoutError as exc:
            raise DeadlineExceeded(
                f"run {run_id!r} was not terminal after {timeout_s} s", code="DEADLINE_EXCEEDED"
            ) from exc

    async def results(self, run_id: str, *, task_ids: Iterable[str] = ()) -> list[TaskResult]:
        """One typed result per scored task of the run, in the run's task order."""
        request = service_pb2.ListResultsRequest(run_id=run_id, task_ids=list(task_ids))
        return [
            result_from_proto(item)
            async for item in self._pages(self._stub.ListResults, request, "results")
        ]

    async def rescore_run(
        self,
        run_id: str,
        *,
        reducers: Sequence[Reducer | str] = (),
        choice_scoring: ChoiceScoring | str | None = None,
        name: str = "",
        request_id: str | None = None,
    ) -> Run:
        """Score a finished run's stored answers again as a new run (``RescoreRun``),
        with this server's scorers: no provider call. ``reducers`` replace the source's
        (empty keeps them); ``choice_scoring`` reads every multiple-choice dataset as
        text or log-probabilities. The new run's ``rescored_from_run_id`` names the
        source; wait for it like any run."""
        settings = run_pb2.RescoreSettings()
        settings.reducers.extend(
            reducer_to_proto(r if isinstance(r, Reducer) else Reducer.parse(r)) for r in reducers
        )
        if choice_scoring is not None:
            settings.choice_scoring = choice_scoring_to_proto(ChoiceScoring(choice_scoring))
        request = service_pb2.RescoreRunRequest(
            run_id=run_id, settings=settings, name=name, request_id=request_id or ""
        )
        response = await self._call(self._stub.RescoreRun, request)
        return run_from_proto(response.run)

    async def compare_runs(
        self,
        *,
        baseline_run_id: str,
        candidate_run_id: str,
        model_pairs: Iterable[ModelPair | tuple[str, str]] = (),
        resamples: int = 0,
        permutations: int = 0,
        seed: int = 0,
    ) -> RunComparison:
        """Compare two finished runs (``CompareRuns``): per matched task and headline
        metric, the delta, its paired bootstrap interval and a paired test's p-value."""
        pairs = [p if isinstance(p, ModelPair) else ModelPair(*p) for p in model_pairs]
        request = service_pb2.CompareRunsRequest(
            baseline_run_id=baseline_run_id,
            candidate_run_id=candidate_run_id,
            model_pairs=[model_pair_to_proto(p) for p in pairs],
            resamples=resamples,
            permutations=permutations,
            seed=seed,
        )
        response = await self._call(self._stub.CompareRuns, request)
        return comparison_from_proto(response.comparison)

    async def results_json(self, run_id: str, *, task_ids: Iterable[str] = ()) -> str:
        """Every result of the run in the contract's canonical JSON (proto3 JSON mapping:
        camelCase names, enum names, 64-bit integers as strings, unset fields left out):
        one ``ListResultsResponse`` holding all pages, exactly what ``buf curl`` prints
        for ListResults when the run fits one page."""
        request = service_pb2.ListResultsRequest(run_id=run_id, task_ids=list(task_ids))
        merged = service_pb2.ListResultsResponse(
            results=[item async for item in self._pages(self._stub.ListResults, request, "results")]
        )
        try:
            return json_format.MessageToJson(merged, indent=2, ensure_ascii=False)
        except json_format.Error as exc:  # a value the JSON mapping has no form for
            raise InternalError(
                f"the server's results have no JSON form: {exc}", code="INTERNAL"
            ) from exc

    async def samples(
        self,
        run_id: str,
        *,
        task_id: str | None = None,
        state: SubtaskState | Iterable[SubtaskState] | None = None,
        page_size: int = 0,
    ) -> AsyncGenerator[Sample, None]:
        """Per-sample rows of the run, optionally of one task and in some states."""
        states = [state] if isinstance(state, SubtaskState) else list(state or ())
        request = service_pb2.ListSamplesRequest(
            run_id=run_id,
            task_id=task_id or "",
            states=[subtask_state_to_proto(s) for s in states],
            page_size=page_size,
        )
        async for item in self._pages(self._stub.ListSamples, request, "samples"):
            yield sample_from_proto(item)
