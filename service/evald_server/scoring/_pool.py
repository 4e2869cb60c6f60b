"""Scoring off the event loop, in worker processes that can be killed one by one.

``concurrent.futures.ProcessPoolExecutor`` cannot stop one running job, so a scorer
over its budget would hold a worker forever. Each job here runs on one long-lived
worker process of its own (at most ``max_workers`` at once, spawned on demand and
reused while healthy); on a timeout or a cancellation that worker is killed and
replaced, and no other job is touched. Workers are started with ``spawn``: a fork of a
process that runs gRPC threads is unsafe.

Fairness: a job starts on one of ``max_workers`` shared slots. Once it has run for
``long_after_s`` it moves, if there is room, to the *long lane* (``max_workers`` more
slots) and gives its shared slot back: one slow task (a huge summarization, a costly
scorer) keeps its worker and its budget, but can no longer make every other tenant's
task wait for it; the OS shares the CPU between them. Each job is bounded by its own
``timeout_s`` (the run's scoring budget) whichever lane it is in.

A sample the scorer raises on is left out of its job, not the job of its task: the
worker finds the samples that raise alone and scores without them (``_isolation``);
the report (or page) lists them as ``unscorable``.
"""

import contextlib
import logging
import multiprocessing
import os
import signal
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

import anyio

from evald_server.domain import ErrorReason, TaskType
from evald_server.scoring._errors import ScoringFailure
from evald_server.scoring._isolation import without_unscorable
from evald_server.scoring._pages import EncodedPage, PageDecoder, SampleSource
from evald_server.scoring._registry import Scorer, scorer_for
from evald_server.scoring._sample_scores import columnar
from evald_server.scoring._scored_pages import ScoredPage
from evald_server.scoring._streamed import StreamedTask
from evald_server.scoring._types import ScoreReport, ScoringSample, UnscorableSample

_log = logging.getLogger(__name__)
_PAGE = 2000  # samples per message when they are given in memory
_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 5.0
_LANE_POLL_S = 0.25  # how often a job waiting for its reply checks its lane


def default_workers() -> int:
    return max(1, min(4, (os.cpu_count() or 2) - 1))


_SCORE, _PAGE_JOB, _AGGREGATE = "score", "page", "aggregate"


@dataclass(frozen=True, slots=True)
class _Job:
    """Opens a job; its samples follow in pages, then a ``_JobEnd`` (see ``_worker_main``).

    ``mode``: score the whole task (the samples), score one page of it against
    ``context`` (the samples), or aggregate its scored pages (``ScoredPage``s, then the
    samples not scored yet, scored here as one last page)."""

    scorer: Scorer | None  # an injected scorer; None: the registry's
    task_type: TaskType
    seed: int
    worst_k: int
    resamples: int
    mode: str = _SCORE
    context: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _JobEnd:
    """The last message of a job: score the pages that came (see ``_worker_main``)."""


@dataclass(frozen=True, slots=True)
class _Reply:
    """A worker's one message per job: its result (a report, a scored page, or None for
    an aggregation the scorer declined), or the exception the job raised.

    A worker also sends an empty one when it has started and is ready for jobs."""

    result: Any = None
    error_type: str = ""
    traceback: str = ""

    @classmethod
    def failed(cls, exc: BaseException) -> "_Reply":
        return cls(error_type=type(exc).__name__, traceback=traceback.format_exc())


_READY = _Reply()
_Page = EncodedPage | Sequence[ScoringSample] | Sequence[ScoredPage]


def _score(job: _Job | None, items: Sequence[Any]) -> _Reply:
    if job is None:
        return _Reply(error_type="RuntimeError", traceback="samples arrived without a job\n")
    try:
        scorer: Any = job.scorer or scorer_for(job.task_type)
        if job.mode == _PAGE_JOB:
            return _Reply(_page(scorer, items, job.context, job.worst_k))
        if job.mode == _AGGREGATE:
            return _Reply(_aggregate(scorer, job, items))
        report, unscorable = without_unscorable(
            items,
            lambda kept: scorer.score(
                kept, seed=job.seed, worst_k=job.worst_k, resamples=job.resamples
            ),
            lambda some: scorer.score(some, seed=job.seed, worst_k=job.worst_k, resamples=1),
        )
        # Columns, whatever the scorer returned: the server reads them row by row.
        return _Reply(
            replace(report, sample_scores=columnar(report.sample_scores), unscorable=unscorable)
        )
    except Exception as exc:
        return _Reply.failed(exc)


def _page(
    scorer: Any, samples: Sequence[ScoringSample], context: tuple[str, ...], worst_k: int
) -> ScoredPage:
    page: ScoredPage
    page, unscorable = without_unscorable(
        samples, lambda kept: scorer.score_page(kept, context=context, worst_k=worst_k)
    )
    return page if not unscorable else replace(page, unscorable=unscorable)


def _aggregate(scorer: Any, job: _Job, items: Sequence[Any]) -> ScoreReport | None:
    pages = [item for item in items if isinstance(item, ScoredPage)]
    rest = [item for item in items if not isinstance(item, ScoredPage)]
    if rest:
        known = tuple(sorted({label for page in pages for label in page.context}))
        pages.append(_page(scorer, rest, known, job.worst_k))
    report: ScoreReport | None = scorer.aggregate(
        pages, seed=job.seed, worst_k=job.worst_k, resamples=job.resamples
    )
    unscorable = tuple(sample for page in pages for sample in page.unscorable)
    return report if report is None or not unscorable else replace(report, unscorable=unscorable)


class _Gathered:
    """A job's samples kept until its end (reduced by the scorer's ``compactor`` when it
    has one), then scored at once."""

    def __init__(
        self, job: _Job | None, compact: Callable[[ScoringSample], ScoringSample] | None = None
    ) -> None:
        self._job = job
        self._compact = compact
        self._items: list[ScoringSample | ScoredPage] = []

    def add(self, items: Sequence[Any]) -> None:
        self._items.extend(items if self._compact is None else map(self._compact, items))

    def reply(self) -> _Reply:
        return _score(self._job, self._items)


class _Streamed:
    """A whole task of a ``streams`` scorer, scored page by page as it arrives: the
    worker holds the samples' scores and metric columns, not the samples."""

    def __init__(self, job: _Job, scorer: Any) -> None:
        self._job = job
        self._scorer = scorer
        self._task = StreamedTask(
            scorer, seed=job.seed, worst_k=job.worst_k, resamples=job.resamples
        )
        self._unscorable: list[UnscorableSample] = []

    def add(self, items: Sequence[Any]) -> None:
        # A page that raises leaves the task as it was (``StreamedTask.add``); its parts
        # are probed as pages of a task of their own.
        _, unscorable = without_unscorable(items, self._task.add, self._probe)
        self._unscorable.extend(unscorable)

    def _probe(self, samples: Sequence[ScoringSample]) -> None:
        job = self._job
        StreamedTask(self._scorer, seed=job.seed, worst_k=job.worst_k, resamples=1).add(samples)

    def reply(self) -> _Reply:
        report = self._task.report()
        return _Reply(
            replace(
                report,
                sample_scores=columnar(report.sample_scores),
                unscorable=tuple(self._unscorable),
            )
        )


def _receiver(job: _Job | None) -> _Gathered | _Streamed:
    """Where a job's pages go: whole-task jobs of a ``streams`` scorer are scored as they
    come; the others (pages, aggregations, any other scorer) once they all came, a
    whole task's samples reduced by the scorer's ``compactor`` (classification)."""
    if job is None or job.mode != _SCORE:
        return _Gathered(job)
    scorer: Any = job.scorer or scorer_for(job.task_type)
    if getattr(scorer, "streams", False):
        return _Streamed(job, scorer)
    compactor = getattr(scorer, "compactor", None)
    return _Gathered(job, None if compactor is None else compactor(job.worst_k))


def _worker_main(conn: Connection) -> None:
    """Worker process: answer jobs until told to stop or the pipe closes.

    A job is a ``_Job``, its pages of samples (decoded as they arrive, while the server
    reads the next one) and a ``_JobEnd``; the ``_Reply`` is sent after the end only, so
    a page that fails still lets the server send the rest and read one reply. ``None``
    stops the worker. A whole task of a ``streams`` scorer is scored page by page as it
    arrives (``_Streamed``): the worker never holds more than a page of its samples.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    conn.send(_READY)
    decoder = PageDecoder()
    receiver: _Gathered | _Streamed = _Gathered(None)
    failure: _Reply | None = None
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        except Exception as exc:  # a message that cannot be unpickled here
            failure = failure or _Reply.failed(exc)
            continue
        if message is None:
            return
        if isinstance(message, _Job):
            decoder, failure = PageDecoder(), None
            try:
                receiver = _receiver(message)
            except Exception as exc:
                receiver, failure = _Gathered(message), _Reply.failed(exc)
        elif isinstance(message, _JobEnd):
            try:
                reply = failure or receiver.reply()
            except Exception as exc:
                reply = _Reply.failed(exc)
            decoder, receiver, failure = PageDecoder(), _Gathered(None), None
            try:
                conn.send(reply)
            except Exception as exc:  # a report that cannot be pickled
                conn.send(_Reply.failed(exc))
            del reply
        elif failure is None:
            try:
                page: _Page = message
                receiver.add(decoder.decode(page) if isinstance(page, EncodedPage) else page)
            except Exception as exc:
                failure = _Reply.failed(exc)


class _SourceFailed(Exception):
    """Reading the samples failed in the server: that error, not a scorer failure."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _Worker:
    def __init__(self, context: Any) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_worker_main, args=(child,), daemon=True, name="evald-scorer"
        )
        self.process.start()
        child.close()
        # Wait here (in a thread) so that start-up imports never eat a job's budget.
        if not self.conn.poll(_START_TIMEOUT_S) or self.conn.recv() != _READY:
            self.kill()
            raise RuntimeError("scoring worker did not start")

    def kill(self) -> None:
        # The pipe is left to the garbage collector: a thread abandoned in roundtrip()
        # may still be reading it and must see EOF, not a reused file descriptor.
        self.process.kill()
        self.process.join(_STOP_TIMEOUT_S)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(_STOP_TIMEOUT_S)
        if self.process.is_alive():
            self.kill()


class _Lease:
    """A job's slot: a shared one, then (after ``long_after_s``) one of the long lane."""

    def __init__(
        self, shared: anyio.CapacityLimiter, long_lane: anyio.CapacityLimiter, long_after_s: float
    ) -> None:
        self._shared = shared
        self._long_lane = long_lane
        self._held = shared
        self._long_after_s = long_after_s
        self._since = 0.0

    async def acquire(self) -> None:
        await self._shared.acquire_on_behalf_of(self)
        self._since = anyio.current_time()

    def move_if_long(self) -> None:
        """Give the shared slot back once the job is long and the long lane has room."""
        if self._held is self._long_lane:
            return
        if anyio.current_time() - self._since < self._long_after_s:
            return
        try:
            self._long_lane.acquire_on_behalf_of_nowait(self)
        except anyio.WouldBlock:
            return  # the long lane is full: keep the shared slot, try again later
        self._shared.release_on_behalf_of(self)
        self._held = self._long_lane

    def release(self) -> None:
        self._held.release_on_behalf_of(self)


class ScoringPool:
    """Runs ``score_task`` in worker processes with a time budget per task.

    ``scorers`` replaces registry entries (tests inject slow or failing scorers); they
    must be picklable, since they travel to the worker with each job.
    """

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        scorers: Mapping[TaskType, Scorer] | None = None,
        worst_k: int = 5,
        resamples: int = 1000,
        long_after_s: float = 2.0,
    ) -> None:
        max_workers = default_workers() if max_workers is None else max_workers
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers}")
        self._context = multiprocessing.get_context("spawn")
        self._slots = anyio.CapacityLimiter(max_workers)
        self._long_lane = anyio.CapacityLimiter(max_workers)
        self._long_after_s = long_after_s
        # Own thread limiter: jobs never wait for (or starve) the default thread pool.
        self._threads = anyio.CapacityLimiter(2 * max_workers + 2)
        self._scorers = dict(scorers or {})
        self._worst_k = worst_k
        self._resamples = resamples
        self._idle: list[_Worker] = []
        self._workers: set[_Worker] = set()
        self._closed = False

    async def score(
        self,
        task_type: TaskType,
        samples: Sequence[ScoringSample] | SampleSource,
        *,
        seed: int,
        timeout_s: float,
    ) -> ScoreReport:
        """Score one task; raises ``ScoringFailure`` (SCORER_FAILED / SCORER_TIMEOUT).

        ``samples`` in memory are sent as they are; a ``SampleSource`` is read page by
        page, each page sent to the worker as soon as it is read. The budget covers
        sending, scoring and the reply, not the time spent waiting for the source
        (reading the store), which is outside it as when samples are given in memory.
        An error of the source propagates as it is.
        """
        job = _Job(self._scorers.get(task_type), task_type, seed, self._worst_k, self._resamples)
        report: ScoreReport = await self._run(job, samples, timeout_s)
        return report

    def scores_pages(self, task_type: TaskType) -> bool:
        """Whether the scorer of ``task_type`` scores page by page (``score_page``)."""
        scorer = self._scorers.get(task_type) or scorer_for(task_type)
        return bool(getattr(scorer, "pages", False))

    async def score_page(
        self,
        task_type: TaskType,
        samples: Sequence[ScoringSample],
        *,
        context: tuple[str, ...],
        timeout_s: float,
    ) -> ScoredPage:
        """One page of a task's samples scored on its own (``scores_pages`` scorers)."""
        job = _Job(
            self._scorers.get(task_type),
            task_type,
            0,
            self._worst_k,
            self._resamples,
            mode=_PAGE_JOB,
            context=context,
        )
        page: ScoredPage = await self._run(job, samples, timeout_s)
        return page

    async def aggregate(
        self,
        task_type: TaskType,
        pages: Sequence[ScoredPage],
        rest: Sequence[ScoringSample],
        *,
        seed: int,
        timeout_s: float,
    ) -> ScoreReport | None:
        """The task's report from its scored pages and the samples not scored yet (one
        last page); None when the pages disagree on their context (see
        ``_scored_pages``): score the whole task instead."""
        job = _Job(
            self._scorers.get(task_type),
            task_type,
            seed,
            self._worst_k,
            self._resamples,
            mode=_AGGREGATE,
        )
        report: ScoreReport | None = await self._run(job, [*pages, *rest], timeout_s)
        return report

    async def _run(self, job: _Job, samples: Sequence[Any] | SampleSource, timeout_s: float) -> Any:
        """One job on a worker of its own; its reply, or ``ScoringFailure``."""
        if self._closed:
            raise RuntimeError("the scoring pool is closed")
        scorer = self._scorers.get(job.task_type) or scorer_for(job.task_type)
        name = f"{scorer.name}@{scorer.version}"
        lease = _Lease(self._slots, self._long_lane, self._long_after_s)
        await lease.acquire()
        try:
            worker = await self._checkout(name)
            healthy = False
            try:
                with anyio.fail_after(timeout_s) as budget:
                    reply = await self._exchange(worker, job, samples, budget, lease)
                healthy = True
            except _SourceFailed as failed:
                raise failed.error from None  # the worker holds half a job: killed below
            except TimeoutError:
                _log.warning(
                    "scorer %s ran past its budget of %g s; worker killed", name, timeout_s
                )
                raise ScoringFailure(
                    ErrorReason.SCORER_TIMEOUT,
                    f"scorer {name} ran past its time budget of {timeout_s:g} s",
                    scorer=name,
                ) from None
            except Exception as exc:
                # The job or the report did not cross the pipe, or the worker died.
                _log.exception(
                    "scoring job for %s failed in transit (worker exit code %s)",
                    name,
                    worker.process.exitcode,
                )
                raise ScoringFailure(
                    ErrorReason.SCORER_FAILED,
                    f"scorer {name} failed: {type(exc).__name__} between the server and its "
                    "worker process (details in the server log)",
                    scorer=name,
                ) from exc
            finally:
                self._checkin(worker, healthy)
        finally:
            lease.release()
        if not reply.error_type:
            return reply.result
        _log.error("scorer %s raised %s:\n%s", name, reply.error_type, reply.traceback)
        raise ScoringFailure(
            ErrorReason.SCORER_FAILED,
            f"scorer {name} failed with {reply.error_type} (details in the server log)",
            scorer=name,
        )

    def lane_stats(self) -> tuple[int, int]:
        """Jobs in (the shared slots, the long lane) right now."""
        return int(self._slots.borrowed_tokens), int(self._long_lane.borrowed_tokens)

    async def _exchange(
        self,
        worker: _Worker,
        job: _Job,
        samples: Sequence[Any] | SampleSource,
        budget: anyio.CancelScope,
        lease: "_Lease",
    ) -> _Reply:
        """Send the job and its pages, then wait for the reply (in threads: pipes block)."""
        await self._in_thread(worker.conn.send, job)
        if isinstance(samples, Sequence):
            for start in range(0, len(samples), _PAGE):
                await self._in_thread(worker.conn.send, samples[start : start + _PAGE])
        else:
            pages = aiter(samples)
            while True:
                started = anyio.current_time()
                try:
                    # Shielded: a page read is short, and its time is given back below.
                    with anyio.CancelScope(shield=True):
                        page = await anext(pages)
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise _SourceFailed(exc) from exc
                finally:
                    budget.deadline += anyio.current_time() - started
                await self._in_thread(worker.conn.send, page)
                del page
        await self._in_thread(worker.conn.send, _JobEnd())
        while not await self._in_thread(worker.conn.poll, _LANE_POLL_S):
            lease.move_if_long()  # the worker is still scoring
        reply = await self._in_thread(worker.conn.recv)
        if not isinstance(reply, _Reply):
            raise TypeError(f"a scoring worker answered {type(reply).__name__}, not a reply")
        return reply

    async def _in_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        # Abandoned on cancellation: the worker is then killed, which ends the call.
        return await anyio.to_thread.run_sync(
            fn, *args, abandon_on_cancel=True, limiter=self._threads
        )

    async def _checkout(self, name: str) -> _Worker:
        while self._idle:
            idle = self._idle.pop()
            if idle.process.is_alive():
                return idle
            # Died while idle (killed from outside, out of memory): never give it a job.
            self._workers.discard(idle)
            idle.kill()
        try:
            worker = await anyio.to_thread.run_sync(_Worker, self._context, limiter=self._threads)
        except (OSError, RuntimeError) as exc:
            _log.error("could not start a scoring worker for %s: %s", name, exc)
            raise ScoringFailure(
                ErrorReason.SCORER_FAILED,
                f"scorer {name} failed: no worker process could be started",
                scorer=name,
            ) from exc
        self._workers.add(worker)
        return worker

    def _checkin(self, worker: _Worker, healthy: bool) -> None:
        if healthy and not self._closed and worker.process.is_alive():
            self._idle.append(worker)
            return
        self._workers.discard(worker)
        worker.kill()

    def close(self) -> None:
        """Stop idle workers and kill busy ones; the pool cannot be used afterwards."""
        self._closed = True
        idle, self._idle = self._idle, []
        for worker in idle:
            worker.stop()
        for worker in self._workers.difference(idle):
            worker.kill()
        self._workers.clear()
