"""The embedded store: one SQLite file in WAL mode, one writer thread, reader threads.

Durability: ``synchronous=NORMAL`` by default. In WAL mode a commit is written to the
WAL before it returns, so it survives the process dying (kill -9, OOM, a crash); only
an OS crash or power loss can lose the last commits, and what such a loss costs here is
repeating those calls (the rows go back to pending), never an inconsistent database
(WAL commits are atomic). ``?synchronous=full`` in the URL fsyncs every commit instead,
for deployments where a repeated call is worse than a slower commit; group commit keeps
that affordable.

One process per file: ``open`` takes the store's OS lock (``StoreFileGuard``) before
anything touches the file and holds it until ``close``; every write first checks that
the file is still the one that was opened.
"""

import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import anyio

from evald_server.domain import (
    Counters,
    EvalError,
    RunState,
    SubtaskPhase,
    SubtaskState,
    TaskState,
    TaskType,
)
from evald_server.store._errors import StoreError, UnstorableOutcome
from evald_server.store._records import (
    CachedAnswer,
    CacheEntry,
    ChangeKind,
    Claim,
    CompletionReport,
    DatasetRow,
    EventRow,
    ExecutionRow,
    FinishReport,
    Json,
    JudgeVerdictRow,
    NewEvent,
    NewRun,
    NewTask,
    ProfileInputs,
    RecordRow,
    RescoreTask,
    RunRow,
    SampleScoreRow,
    SharedRate,
    Shares,
    StateCounts,
    StoreChange,
    SubtaskOutcome,
    SubtaskRow,
    TaskFinish,
    TaskOutput,
    TaskRow,
    TransitionReport,
)
from evald_server.store.sqlite import _cache as cache
from evald_server.store.sqlite import _datasets as datasets
from evald_server.store.sqlite import _reads as reads
from evald_server.store.sqlite import _runs as runs
from evald_server.store.sqlite import _work as work
from evald_server.store.sqlite._db_thread import DbThread
from evald_server.store.sqlite._schema import migrate
from evald_server.store.sqlite._store_file import StoreFileGuard, StoreLost

T = TypeVar("T")

_SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}
_WRITER_CACHE_KIB = -4000  # PRAGMA cache_size: negative is KiB
_READER_CACHE_KIB = -1000
# What the driver raises for a value SQLite cannot keep: an int beyond 64 bits, text
# that is not UTF-8 (a lone surrogate), a type it cannot bind, a string over its
# length limit, a broken constraint. A full disk or a lost file is none of these.
_UNSTORABLE = (
    OverflowError,
    UnicodeEncodeError,
    sqlite3.DataError,
    sqlite3.IntegrityError,
    sqlite3.ProgrammingError,
)


class SqliteStore:
    """``Store`` on one SQLite file. Create with ``await SqliteStore.open(...)``."""

    def __init__(
        self,
        path: Path,
        *,
        synchronous: str = "normal",
        readers: int = 2,
        events_retained_per_run: int = 100_000,
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise StoreError(
                f"synchronous must be one of {sorted(_SYNCHRONOUS)}, not {synchronous!r}"
            )
        self.path = path
        self.owner = f"evald-{uuid.uuid4().hex[:12]}"
        self._synchronous = _SYNCHRONOUS[synchronous]
        self._retain = events_retained_per_run
        self._writer = DbThread("evald-store-writer", self._connect_writer)
        self._readers = [
            DbThread(f"evald-store-reader-{i}", self._connect_reader) for i in range(readers)
        ]
        self._next_reader = 0
        self._guard = StoreFileGuard(path)

    @classmethod
    async def open(
        cls, path: Path, *, synchronous: str = "normal", events_retained_per_run: int = 100_000
    ) -> "SqliteStore":
        store = cls(path, synchronous=synchronous, events_retained_per_run=events_retained_per_run)
        store._guard.acquire()  # StoreLocked when another server has this file
        try:
            await store._writer.start()  # creates the file and migrates before readers open it
            for reader in store._readers:
                await reader.start()
            store._guard.remember_identity()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await store.close()
            raise
        return store

    def problem(self) -> str | None:
        """Why this store can no longer be written (its file deleted or replaced), or None."""
        try:
            self._guard.verify()
        except StoreLost as lost:
            return str(lost)
        return None

    def unavailable(self) -> str | None:
        return None  # a local file is there or lost (``problem``), never "unreachable"

    async def changes(self) -> AsyncIterator[StoreChange]:
        """Nothing: one process per file, so no other process changes it."""
        await anyio.sleep_forever()
        yield StoreChange(ChangeKind.RESYNC)  # pragma: no cover (never reached)

    async def capacity_shares(
        self,
        limits: Mapping[str, int],
        held: Mapping[str, int],
        rates: Mapping[str, SharedRate] | None = None,
        published: Mapping[str, float] | None = None,
    ) -> Shares:
        """One process: every model's whole limit and rate is its own."""
        return Shares(dict(limits), {key: rate.limit for key, rate in (rates or {}).items()})

    @classmethod
    async def from_url(cls, url: str, *, events_retained_per_run: int = 100_000) -> "SqliteStore":
        """``sqlite:///relative/path`` or ``sqlite:////absolute/path``, with an optional
        ``?synchronous=normal|full``."""
        parts = urlsplit(url)
        if parts.scheme != "sqlite" or not parts.path.startswith("/") or len(parts.path) < 2:
            raise StoreError(f"not a sqlite:/// URL with a file path: {url!r}")
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        unknown = set(options) - {"synchronous"}
        if unknown:
            raise StoreError(f"unknown store URL options: {sorted(unknown)}")
        return await cls.open(
            Path(parts.path[1:]),
            synchronous=options.get("synchronous", "normal"),
            events_retained_per_run=events_retained_per_run,
        )

    def _connect_writer(self) -> sqlite3.Connection:
        conn = self._connect()
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            migrate(conn)
        except sqlite3.OperationalError as exc:  # e.g. a read-only file seen only now
            conn.close()
            raise StoreError(f"cannot write the store {self.path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # not a database, or a corrupt one
            conn.close()
            raise StoreError(f"the store {self.path} is not a usable SQLite file: {exc}") from exc
        return conn

    def _connect_reader(self) -> sqlite3.Connection:
        conn = self._connect()
        conn.execute("PRAGMA query_only = ON")
        # 1 MB of page cache: a reader's big job is scoring's one pass over a task's
        # outputs, which a cache does not speed up (the OS caches the file); two readers
        # at 4 MB each were ~8 MB of the server's peak while a 100,000-subtask task was
        # read for scoring. The writer keeps 4 MB: claims and commits revisit its pages.
        conn.execute(f"PRAGMA cache_size = {_READER_CACHE_KIB}")
        return conn

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open {self.path}: {exc}") from exc
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA temp_store = MEMORY")
        # 4 MB of page cache (a reader's is set lower): the OS caches the file too, and a
        # large scoring read would otherwise grow each to SQLite's full allowance.
        conn.execute(f"PRAGMA cache_size = {_WRITER_CACHE_KIB}")
        return conn

    async def close(self) -> None:
        for reader in self._readers:
            await reader.close()
        await self._writer.close()
        self._guard.release()

    async def _write(self, fn: Callable[..., T], *args: Any) -> T:
        self._guard.verify()  # a write into a deleted or replaced file would be lost
        return await self._writer.call(fn, *args)

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        reader = self._readers[self._next_reader]
        self._next_reader = (self._next_reader + 1) % len(self._readers)
        return await reader.call(fn, *args)

    # Datasets.
    async def create_dataset(
        self, dataset: DatasetRow, records: Iterable[RecordRow]
    ) -> tuple[DatasetRow, bool]:
        return await self._write(datasets.create_dataset, dataset, records)

    async def find_dataset(self, tenant: str, name: str, version: str) -> DatasetRow | None:
        return await self._read(datasets.find_dataset, tenant, name, version)

    async def get_dataset(self, dataset_id: str) -> DatasetRow | None:
        return await self._read(datasets.get_dataset, dataset_id)

    async def list_datasets(
        self,
        tenant: str,
        after: tuple[float, str] | None,
        limit: int,
        *,
        name: str | None = None,
        task_type: TaskType | None = None,
    ) -> list[DatasetRow]:
        return await self._read(datasets.list_datasets, tenant, name, task_type, after, limit)

    async def read_records(self, dataset_id: str, idxs: Sequence[int]) -> list[RecordRow]:
        return await self._read(datasets.read_records, dataset_id, idxs)

    # Runs.
    async def create_run(
        self, run: NewRun, tasks: Sequence[NewTask], *, max_live_runs: int | None = None
    ) -> tuple[RunRow, bool]:
        return await self._write(runs.create_run, run, tasks, self._retain, max_live_runs)

    async def create_rescore_run(
        self, run: NewRun, tasks: Sequence[RescoreTask], *, max_live_runs: int | None = None
    ) -> tuple[RunRow, bool]:
        return await self._write(
            runs.create_rescore_run, run, tasks, time.time(), self._retain, max_live_runs
        )

    async def get_run(self, run_id: str) -> RunRow | None:
        return await self._read(reads.get_run, run_id)

    async def list_runs(
        self,
        tenant: str,
        after: tuple[float, str] | None,
        limit: int,
        *,
        states: Sequence[RunState] = (),
    ) -> list[RunRow]:
        return await self._read(reads.list_runs, tenant, [s.value for s in states], after, limit)

    async def find_run_by_request(self, tenant: str, request_id: str) -> RunRow | None:
        return await self._read(reads.find_run_by_request, tenant, request_id)

    async def live_run_ids(self) -> list[str]:
        return await self._read(reads.live_run_ids)

    async def get_tasks(self, run_id: str) -> list[TaskRow]:
        return await self._read(reads.get_tasks, run_id)

    async def get_task(self, task_id: str) -> TaskRow | None:
        return await self._read(reads.get_task, task_id)

    # Execution.
    async def claim_ready(self, run_id: str, model_id: str, limit: int, now: float) -> Claim:
        return await self._write(
            work.claim_ready, run_id, model_id, limit, self.owner, now, self._retain
        )

    async def record_outcomes(
        self, outcomes: Sequence[SubtaskOutcome], now: float
    ) -> CompletionReport:
        try:
            return await self._write(work.record_outcomes, outcomes, self.owner, now, self._retain)
        except _UNSTORABLE as exc:  # rolled back by ``transaction``
            raise UnstorableOutcome(exc) from exc

    async def requeue_running(self, *, owner: str | None, now: float) -> int:
        return await self._write(runs.requeue_running, owner, now)

    async def cancel_run(
        self, run_id: str, now: float, *, reason: str | None = None
    ) -> TransitionReport:
        return await self._write(runs.cancel_run, run_id, now, self._retain, reason)

    async def retry_failed(
        self,
        run_id: str,
        task_ids: Sequence[str],
        categories: Sequence[str],
        now: float,
        *,
        reasons: Sequence[str] = (),
        states: Sequence[SubtaskState] = (SubtaskState.FAILED_PERMANENT,),
    ) -> TransitionReport:
        return await self._write(
            runs.retry_failed,
            run_id,
            task_ids,
            categories,
            now,
            self._retain,
            reasons,
            [s.value for s in states],
        )

    async def fail_model_work(
        self, run_id: str, model_id: str, error: EvalError, now: float
    ) -> list[str]:
        return await self._write(runs.fail_model_work, run_id, model_id, error, now)

    # Scoring and results.
    async def scoring_task_ids(self) -> list[str]:
        return await self._read(reads.scoring_task_ids)

    async def claim_scoring(self, task_id: str) -> bool:
        """One process per file: a task in ``scoring`` is this process's to score."""
        task = await self._read(reads.get_task, task_id)
        return task is not None and task.state is TaskState.SCORING

    async def task_subtasks(
        self,
        task_id: str,
        states: Sequence[SubtaskState],
        after_row: int,
        limit: int,
        *,
        phase: SubtaskPhase = SubtaskPhase.ANSWER,
    ) -> list[SubtaskRow]:
        return await self._read(reads.task_subtasks, task_id, states, after_row, limit, phase)

    async def run_subtasks(
        self,
        run_id: str,
        task_id: str | None,
        states: Sequence[SubtaskState],
        after_row: int,
        limit: int,
        *,
        output_chars: int | None = None,
        phase: SubtaskPhase | None = SubtaskPhase.ANSWER,
    ) -> list[SubtaskRow]:
        return await self._read(
            reads.run_subtasks, run_id, task_id, states, after_row, limit, output_chars, phase
        )

    async def task_outputs(
        self, task_id: str, after_row: int, limit: int, *, unexecuted: bool = False
    ) -> list[TaskOutput]:
        return await self._read(reads.task_outputs, task_id, after_row, limit, unexecuted)

    async def store_executions(self, executions: Sequence[ExecutionRow]) -> None:
        await self._write(runs.store_executions, executions)

    async def profile_inputs(
        self, task_id: str, *, phase: SubtaskPhase = SubtaskPhase.ANSWER
    ) -> ProfileInputs:
        return await self._read(reads.profile_inputs, task_id, phase)

    async def task_verdicts(
        self, task_id: str, after_row: int, limit: int
    ) -> list[JudgeVerdictRow]:
        return await self._read(reads.task_verdicts, task_id, after_row, limit)

    async def finish_task(self, finish: TaskFinish) -> FinishReport:
        return await self._write(runs.finish_task, finish, self._retain)

    async def store_sample_scores(self, scores: Iterable[SampleScoreRow]) -> None:
        await self._write(runs.store_sample_scores, scores)

    async def read_results(self, run_id: str) -> list[tuple[str, Json]]:
        return await self._read(reads.read_results, run_id)

    async def recount_task(self, task_id: str) -> Counters:
        return await self._read(reads.recount_task, task_id)

    async def state_counts(self) -> StateCounts:
        return await self._read(reads.state_counts)

    # The response cache.
    async def cache_lookup(
        self, scope: str, keys: Sequence[str], now: float, ttl_s: float
    ) -> dict[str, CachedAnswer]:
        return await self._write(cache.cache_lookup, scope, keys, now, ttl_s)

    async def cache_put(
        self, entries: Sequence[CacheEntry], now: float, *, ttl_s: float, max_entries: int
    ) -> int:
        return await self._write(cache.cache_put, entries, now, ttl_s, max_entries)

    async def cache_size(self) -> int:
        return await self._read(cache.cache_size)

    # Events.
    async def append_events(
        self, run_id: str, events: Sequence[NewEvent], *, live_only: bool = False
    ) -> list[EventRow]:
        return await self._write(runs.add_events, run_id, events, self._retain, live_only)

    async def read_events(self, run_id: str, after_seq: int, limit: int) -> list[EventRow]:
        return await self._read(reads.read_events, run_id, after_seq, limit)


def now() -> float:
    """The store's clock: wall time, because retry times must survive a restart."""
    return time.time()
