"""``EvaldClient``: the blocking twin of ``AsyncEvaldClient``.

It runs one ``AsyncEvaldClient`` on an event loop in a background thread (an anyio
blocking portal) and hands each call to that loop. One implementation serves both
worlds, so the sync client gets the same watch resumption, paging and error mapping,
and it can be shared by several threads. (A grpc sync channel would have meant a second
copy of all of that.) The thread is a daemon and a finalizer closes the client, so a
script that forgets ``close()`` still exits.
"""

import functools
import threading
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

import anyio
from anyio.from_thread import BlockingPortal

from evald_client._channel import DEFAULT_MAX_MESSAGE_BYTES, TlsConfig
from evald_client._client import DEFAULT_CHUNK_BYTES, DEFAULT_TIMEOUT_S, AsyncEvaldClient
from evald_client._comparison import ModelPair, RunComparison
from evald_client._enums import (
    ChoiceScoring,
    ErrorCategory,
    PromptFormat,
    RunState,
    SubtaskState,
    TaskType,
)
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
from evald_client._watch import ReconnectPolicy

_T = TypeVar("_T")
_START_TIMEOUT_S = 30.0


class _LoopThread:
    """An asyncio event loop in a daemon thread, reached through a blocking portal."""

    def __init__(self) -> None:
        ready: Future[BlockingPortal] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="evald-client-loop", daemon=True
        )
        self._thread.start()
        self.portal = ready.result(timeout=_START_TIMEOUT_S)

    @staticmethod
    def _run(ready: "Future[BlockingPortal]") -> None:
        async def serve() -> None:
            async with BlockingPortal() as portal:
                ready.set_result(portal)
                await portal.sleep_until_stopped()

        try:
            anyio.run(serve, backend="asyncio")
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    def stop(self) -> None:
        self.portal.call(self.portal.stop)
        self._thread.join(timeout=_START_TIMEOUT_S)


def _shutdown(loop: _LoopThread, client: "AsyncEvaldClient | None") -> None:
    try:
        if client is not None:
            loop.portal.call(client.close)
    finally:
        loop.stop()


async def _next(iterator: AsyncIterator[_T]) -> tuple[bool, _T | None]:
    # A (done, item) pair: StopAsyncIteration must not cross the thread boundary.
    try:
        return False, await iterator.__anext__()
    except StopAsyncIteration:
        return True, None


class EvaldClient:
    """A blocking client of one evald server; same methods as ``AsyncEvaldClient``,
    iterators are plain iterators. Use ``with EvaldClient(...) as client:`` or call
    ``close()``, which also stops the background thread."""

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
        loop = _LoopThread()
        self._portal = loop.portal
        try:
            # The grpc.aio channel must be created on the loop that will use it.
            self._client: AsyncEvaldClient = self._portal.call(
                functools.partial(
                    AsyncEvaldClient,
                    target,
                    token=token,
                    tls=tls,
                    timeout_s=timeout_s,
                    max_message_bytes=max_message_bytes,
                    reconnect=reconnect,
                )
            )
        except BaseException:
            loop.stop()
            raise
        # Runs on close(), when the client is garbage-collected, or at interpreter exit.
        self._finalizer = weakref.finalize(self, _shutdown, loop, self._client)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the channel and stop the background event loop (idempotent)."""
        self._finalizer()

    @property
    def _closed(self) -> bool:
        return not self._finalizer.alive

    def _iterate(self, iterator: AsyncIterator[_T]) -> Iterator[_T]:
        try:
            while True:
                done, item = self._portal.call(_next, iterator)
                if done:
                    return
                yield item  # type: ignore[misc]  # not done: item is a _T
        finally:
            if not self._closed:
                self._portal.call(functools.partial(_aclose, iterator))

    @property
    def target(self) -> str:
        return self._client.target

    def list_models(self) -> list[Model]:
        return self._portal.call(self._client.list_models)

    def upload_dataset(
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
        return self._portal.call(
            functools.partial(
                self._client.upload_dataset,
                name=name,
                version=version,
                task_type=task_type,
                path=path,
                records=records,
                prompt_template=prompt_template,
                request_id=request_id,
                chunk_bytes=chunk_bytes,
                prompt=prompt,
            )
        )

    def get_dataset(
        self,
        *,
        dataset_id: str | None = None,
        name: str | None = None,
        version: str | None = None,
    ) -> Dataset:
        return self._portal.call(
            functools.partial(
                self._client.get_dataset, dataset_id=dataset_id, name=name, version=version
            )
        )

    def list_datasets(
        self,
        *,
        name: str | None = None,
        task_type: TaskType | str | None = None,
        page_size: int = 0,
    ) -> Iterator[Dataset]:
        return self._iterate(
            self._client.list_datasets(name=name, task_type=task_type, page_size=page_size)
        )

    def create_run(
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
        return self._portal.call(
            functools.partial(
                self._client.create_run,
                models=models,
                datasets=datasets,
                name=name,
                max_concurrency=max_concurrency,
                repeat=repeat,
                retry_policy=retry_policy,
                generation=generation,
                labels=labels,
                request_id=request_id,
                dataset_options=dataset_options,
                prompt=prompt,
                choice_scoring=choice_scoring,
                budget=budget,
                judge=judge,
                response_cache=response_cache,
                reducers=reducers,
                prompt_format=prompt_format,
            )
        )

    def get_run(self, run_id: str) -> Run:
        return self._portal.call(self._client.get_run, run_id)

    def list_runs(self, *, states: Iterable[RunState] = (), page_size: int = 0) -> Iterator[Run]:
        return self._iterate(self._client.list_runs(states=states, page_size=page_size))

    def cancel_run(self, run_id: str) -> Run:
        return self._portal.call(self._client.cancel_run, run_id)

    def retry_run(
        self,
        run_id: str,
        *,
        task_ids: Iterable[str] = (),
        categories: Iterable[ErrorCategory] = (),
        reasons: Iterable[str] = (),
        states: Iterable[SubtaskState] = (),
    ) -> RetryOutcome:
        return self._portal.call(
            functools.partial(
                self._client.retry_run,
                run_id,
                task_ids=task_ids,
                categories=categories,
                reasons=reasons,
                states=states,
            )
        )

    def watch(self, run_id: str, *, after_seq: int = 0) -> Iterator[RunEvent]:
        return self._iterate(self._client.watch(run_id, after_seq=after_seq))

    def wait(self, run_id: str, *, timeout_s: float | None = None) -> Run:
        return self._portal.call(functools.partial(self._client.wait, run_id, timeout_s=timeout_s))

    def results(self, run_id: str, *, task_ids: Iterable[str] = ()) -> list[TaskResult]:
        return self._portal.call(functools.partial(self._client.results, run_id, task_ids=task_ids))

    def rescore_run(
        self,
        run_id: str,
        *,
        reducers: Sequence[Reducer | str] = (),
        choice_scoring: ChoiceScoring | str | None = None,
        name: str = "",
        request_id: str | None = None,
    ) -> Run:
        return self._portal.call(
            functools.partial(
                self._client.rescore_run,
                run_id,
                reducers=reducers,
                choice_scoring=choice_scoring,
                name=name,
                request_id=request_id,
            )
        )

    def compare_runs(
        self,
        *,
        baseline_run_id: str,
        candidate_run_id: str,
        model_pairs: Iterable[ModelPair | tuple[str, str]] = (),
        resamples: int = 0,
        permutations: int = 0,
        seed: int = 0,
    ) -> RunComparison:
        return self._portal.call(
            functools.partial(
                self._client.compare_runs,
                baseline_run_id=baseline_run_id,
                candidate_run_id=candidate_run_id,
                model_pairs=model_pairs,
                resamples=resamples,
                permutations=permutations,
                seed=seed,
            )
        )

    def results_json(self, run_id: str, *, task_ids: Iterable[str] = ()) -> str:
        return self._portal.call(
            functools.partial(self._client.results_json, run_id, task_ids=task_ids)
        )

    def samples(
        self,
        run_id: str,
        *,
        task_id: str | None = None,
        state: SubtaskState | Iterable[SubtaskState] | None = None,
        page_size: int = 0,
    ) -> Iterator[Sample]:
        return self._iterate(
            self._client.samples(run_id, task_id=task_id, state=state, page_size=page_size)
        )


async def _aclose(iterator: AsyncIterator[Any]) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()
