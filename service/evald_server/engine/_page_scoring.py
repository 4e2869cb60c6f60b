"""Incremental scoring: a task's samples are scored page by page as their outcomes
commit, in the scoring workers, so that once its last answer is in only the
aggregation and the bootstrap remain (``scoring._scored_pages``).

A session is opened for a task that starts with no success (a fresh task, or one whose
every earlier success was lost to nothing: after a restart or a RetryRun a task with
successes is scored from the store, as before) when its scorer scores pages and the
task is not larger than ``max_samples`` (the pages' columns stay in the server; a
larger task is streamed from the store at the end, in bounded memory). A success is
noted when its call returns (the claimed subtask holds the record) and joins the page
only once its outcome has committed. Full pages go to the workers one at a time, off
the committer's path; once fewer than a page of the task's subtasks are left, whatever
has committed goes as soon as no page job of the task is in flight, so that what is
left to score after the last answer is what committed during the last page job.

A scored page's per-sample scores are stored at once (``store_sample_scores``) and
dropped from the session: after the last answer only the last samples' scores are
written, and the aggregation job is sent the pages without their per-sample scores
(its report carries the last samples' only). A task that ends without a report has
the stored scores cleared by its finish (``TaskFinish.clear_scores``).

Every doubt falls back to scoring the whole task from the store: a page job that
failed (for whatever reason: a page job never takes the engine down), a count of
committed successes that differs from the store's, a cancelled run, a page scored
against a label set that the task's final one differs from. A sample the scorer raised
on alone is left out of its page (``unscorable``), stored flagged, and named in the
task's result.
"""

import dataclasses
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import anyio
import anyio.abc

from evald_server.domain import OutcomeKind, TaskType
from evald_server.scoring import (
    UNSCORABLE_FLAG,
    SampleScores,
    ScoredPage,
    ScoreReport,
    ScoringFailure,
    ScoringSample,
)
from evald_server.store import ClaimedSubtask, SampleScoreRow, SubtaskOutcome

_log = logging.getLogger(__name__)
# Above this, a task is scored from the store at the end: a session holds its pages'
# columns and, while the workers are behind, committed samples with their records
# (~0.5 kB each). At 100,000 samples (bench_e2e P3, latency 0: inference outruns one
# worker) the server's peak went from 132 to 172 MB; at 20,000 a session stays ~10 MB.
MAX_SAMPLES = 20_000
StoreScores = Callable[[Iterable[SampleScoreRow]], Awaitable[None]]
_NO_SCORES = SampleScores()


@runtime_checkable
class PageScoringPort(Protocol):
    """What incremental scoring needs of the scoring pool."""

    def scores_pages(self, task_type: TaskType) -> bool: ...

    async def score_page(
        self,
        task_type: TaskType,
        samples: Sequence[ScoringSample],
        *,
        context: tuple[str, ...],
        timeout_s: float,
    ) -> ScoredPage: ...

    async def aggregate(
        self,
        task_type: TaskType,
        pages: Sequence[ScoredPage],
        rest: Sequence[ScoringSample],
        *,
        seed: int,
        timeout_s: float,
    ) -> ScoreReport | None: ...


@dataclass(slots=True)
class _Session:
    task_id: str
    run_id: str
    task_type: TaskType
    timeout_s: float
    expected: int  # the task's subtasks: successes beyond these never come
    waiting: list[ScoringSample] = field(default_factory=list)  # committed, not sent
    pages: list[ScoredPage] = field(default_factory=list)
    context: tuple[str, ...] = ()
    committed: int = 0  # successes committed into this session
    broken: bool = False  # a page job failed: score the whole task at the end
    queued: bool = False
    idle: anyio.Event = field(default_factory=anyio.Event)  # no page job in flight
    busy: bool = False


class PageScoring:
    def __init__(
        self,
        scoring: PageScoringPort,
        store_scores: StoreScores,
        *,
        page_size: int,
        max_samples: int = MAX_SAMPLES,
    ) -> None:
        self._scoring = scoring
        self._store_scores = store_scores
        self._page_size = page_size
        self._max_samples = max_samples
        self._sessions: dict[str, _Session] = {}
        self._answered: dict[int, ScoringSample] = {}  # row id → success not committed yet
        self._queue: deque[_Session] = deque()
        self._wake = anyio.Event()
        self.pages_scored = 0
        self.fallbacks = 0

    def open(
        self, task_id: str, run_id: str, task_type: TaskType, samples: int, timeout_s: float
    ) -> None:
        """Score this task page by page (``samples``: its subtasks, all repeats)."""
        if task_id in self._sessions or samples > self._max_samples:
            return
        if not self._scoring.scores_pages(task_type):
            return
        session = _Session(task_id, run_id, task_type, timeout_s, samples)
        session.idle.set()
        self._sessions[task_id] = session

    def answered(self, item: ClaimedSubtask, outcome: SubtaskOutcome) -> None:
        """A call succeeded (its outcome is on its way to the store)."""
        if outcome.kind is OutcomeKind.SUCCEEDED and item.task_id in self._sessions:
            self._answered[item.row_id] = ScoringSample(
                str(item.row_id),
                item.record_id,
                item.repeat_index,
                item.fields,
                outcome.output or "",  # as the store reads a stored output back
                top_logprobs=outcome.top_logprobs,
            )

    def committed(self, batch: Iterable[SubtaskOutcome]) -> None:
        """These outcomes have committed: their successes join their task's page."""
        if not self._answered:
            return
        for outcome in batch:
            sample = self._answered.pop(outcome.row_id, None)
            session = self._sessions.get(outcome.task_id)
            # A success the committer had to store as a failure (unstorable) is none.
            if sample is None or session is None or outcome.kind is not OutcomeKind.SUCCEEDED:
                continue
            session.waiting.append(sample)
            session.committed += 1
            self._queue_if_ready(session)

    def _queue_if_ready(self, session: _Session) -> None:
        """Queue the session's next page job: a full page, or, in the task's last page,
        what has committed once no page job of the task is in flight."""
        if session.queued or not session.waiting:
            return
        last_page = session.expected - session.committed < self._page_size
        if len(session.waiting) >= self._page_size or (last_page and not session.busy):
            session.queued = True
            self._queue.append(session)
            self._wake.set()

    def discard_run(self, run_id: str) -> None:
        """The run was cancelled or has ended: its tasks are scored from the store."""
        for task_id in [t for t, s in self._sessions.items() if s.run_id == run_id]:
            self.discard(task_id)

    def discard(self, task_id: str) -> None:
        # Its successes still on their way to the store are dropped as they commit.
        self._sessions.pop(task_id, None)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Send full pages to the workers, one page job at a time."""
        task_status.started()
        while True:
            while not self._queue:
                self._wake = anyio.Event()
                await self._wake.wait()
            session = self._queue.popleft()
            session.queued = False
            if self._sessions.get(session.task_id) is session:
                await self._score_page(session)

    async def _score_page(self, session: _Session) -> None:
        page, session.waiting = (
            session.waiting[: self._page_size],
            session.waiting[self._page_size :],
        )
        session.busy = True
        session.idle = anyio.Event()
        try:
            scored = await self._scoring.score_page(
                session.task_type, page, context=session.context, timeout_s=session.timeout_s
            )
        except ScoringFailure as failure:
            _log.warning(
                "page scoring of task %s failed (%s); it is scored whole at the end",
                session.task_id,
                failure.error.message,
            )
            session.broken = True
        except Exception:  # a bug: this task is scored whole, the engine goes on
            _log.exception("page scoring of task %s failed; it is scored whole", session.task_id)
            session.broken = True
        else:
            session.context = scored.context
            self.pages_scored += 1
            try:
                await self._store_scores(_score_rows(scored))
            except Exception as exc:  # StoreError, or a score the store cannot keep
                _log.warning(
                    "storing the page scores of task %s failed (%s); it is scored whole at the end",
                    session.task_id,
                    exc,
                )
                session.broken = True
            # Stored: the aggregation needs the page's columns, not its per-sample scores.
            session.pages.append(dataclasses.replace(scored, sample_scores=_NO_SCORES))
        finally:
            session.busy = False
            session.idle.set()
        self._queue_if_ready(session)

    async def finish(self, task_id: str, succeeded: int, *, seed: int) -> ScoreReport | None:
        """The task's report from its pages, or None: score the whole task instead.

        ``succeeded``: the store's count of the task's successes; the session must hold
        exactly that many. A scorer failure of the aggregation raises ``ScoringFailure``.
        """
        session = self._sessions.get(task_id)
        if session is None:
            return None
        self.discard(task_id)  # no page job of the task starts from here on
        while session.busy:  # the one in flight, its scores stored
            await session.idle.wait()
        if session.broken or session.committed != succeeded:
            self.fallbacks += 1
            return None
        report = await self._scoring.aggregate(
            session.task_type,
            session.pages,
            session.waiting,
            seed=seed,
            timeout_s=session.timeout_s,
        )
        if report is None:
            self.fallbacks += 1
        return report


def _score_rows(page: ScoredPage) -> Iterator[SampleScoreRow]:
    for score in page.sample_scores:
        yield SampleScoreRow(int(score.subtask_id), score.scores, score.correct, score.flags)
    for sample in page.unscorable:
        yield SampleScoreRow(int(sample.subtask_id), {}, None, (UNSCORABLE_FLAG,))
