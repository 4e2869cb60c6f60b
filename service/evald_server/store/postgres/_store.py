"""The replicated store: N evald processes on one PostgreSQL database.

Driver: asyncpg, chosen by measurement (bench/bench_pg_driver.py, bench/results/
pg_driver.json: 2.3 µs of client CPU per committed outcome against psycopg 3's 10.0,
4.1 against 15 per claimed row), with its connection pool (``pool_size``).

Beside the port's operations, each store runs a maintenance task: every
``heartbeat_s`` it renews this replica's lease (``_leases``), returns the running
subtasks of dead replicas to pending, frees their scoring jobs, and keeps the change
feed's ``LISTEN`` connection alive. Losing the database makes ``unavailable()`` say so
(health NOT_SERVING); operations wait for it to come back for up to ``wait_s``,
retrying what is safe to retry (claims find their own unacknowledged commit by token,
outcomes are owner-guarded, a task's end is guarded by its state).

The database password never leaves this module: messages name the URL without it.
"""

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import time
import uuid
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg

from evald_server.domain import (
    Counters,
    EvalError,
    RunState,
    SubtaskPhase,
    SubtaskState,
    TaskType,
)
from evald_server.store._errors import StoreError, StoreUnavailable, UnstorableOutcome
from evald_server.store._records import (
    CachedAnswer,
    CacheEntry,
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
from evald_server.store.postgres import _cache as cache
from evald_server.store.postgres import _datasets as datasets
from evald_server.store.postgres import _leases as leases
from evald_server.store.postgres import _reads as reads
from evald_server.store.postgres import _runs as runs
from evald_server.store.postgres import _work as work
from evald_server.store.postgres._common import EVERYONE, SCORING, notice, notify
from evald_server.store.postgres._feed import ChangeFeed
from evald_server.store.postgres._schema import migrate

T = TypeVar("T")
_log = logging.getLogger("evald.store")

# The connection is gone or refused, or the server is shutting down or restarting.
_LOST = (
    OSError,
    asyncio.TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.InterfaceError,
    # A session cut in the middle of an operation can leave the client's protocol in a
    # state no later operation gets out of ("cannot switch to state 15; another
    # operation is in progress": MagicStack/asyncpg#784, sqlalchemy#13241).
    asyncpg.exceptions.InternalClientError,
)
# Lost races that PostgreSQL resolves by aborting one transaction: run it again.
_CONFLICT = (asyncpg.exceptions.DeadlockDetectedError, asyncpg.exceptions.SerializationError)
# What asyncpg raises for a value PostgreSQL cannot keep: an int beyond its column,
# text it cannot encode (client side, or a NUL byte), a broken constraint (SQLSTATE
# classes 22 and 23). A lost connection or a full disk is none of these.
_UNSTORABLE = (asyncpg.exceptions.DataError, asyncpg.exceptions.IntegrityConstraintViolationError)


@contextlib.contextmanager
def _closed_if_cut(conn: asyncpg.Connection) -> Iterator[None]:
    """A query cut off by a cancel or a time bound leaves its transaction open, and the
    pool would reset such a connection with a warning: closing it lets the server roll
    back, and the pool opens a fresh one."""
    try:
        yield
    except (asyncio.CancelledError, TimeoutError):
        conn.terminate()
        raise


def redact(url: str) -> str:
    """``url`` without its password (and without its query, which may carry one)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    if parts.username:
        host = f"{parts.username}@{host}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class PostgresStore:
    """``Store`` on PostgreSQL, shared by replicas. Create with ``await PostgresStore.open``."""

    def __init__(
        self,
        url: str,
        *,
        events_retained_per_run: int = 100_000,
        pool_size: int = 10,
        replica_id: str | None = None,
        lease_s: float = 15.0,
        heartbeat_s: float = 3.0,
        wait_s: float = 120.0,
        count_statements: bool = False,
    ) -> None:
        if not 0 < heartbeat_s < lease_s:
            raise StoreError(
                f"store.heartbeat_s ({heartbeat_s}) must be above 0 and below "
                f"store.lease_s ({lease_s})"
            )
        self._url = url
        self.where = redact(url)
        self.replica_id = replica_id or default_replica_id()
        self.owner = f"{self.replica_id}#{uuid.uuid4().hex[:8]}"
        self._retain = events_retained_per_run
        self._pool_size = pool_size
        self.lease_s = lease_s
        self.heartbeat_s = heartbeat_s
        self._wait_s = wait_s
        self._pool: asyncpg.Pool | None = None
        self._feed = ChangeFeed(self.owner, self._connect)
        self._maintenance: asyncio.Task[None] | None = None
        self._down: str | None = None  # why the database is unreachable, while it is
        self._closed = False
        self._tokens = itertools.count(1)
        self._renewed_at = time.monotonic()  # the last renewal of this replica's lease
        self._shares: Shares | None = None
        self.members: list[tuple[str, str]] = []  # live (replica id, owner), last heartbeat
        self._count_statements = count_statements
        self.statements = 0  # statements sent, with count_statements (the bench)

    @classmethod
    async def open(cls, url: str, **options: Any) -> "PostgresStore":
        store = cls(url, **options)
        try:
            store._pool = await asyncpg.create_pool(
                url,
                min_size=1,
                max_size=store._pool_size,
                timeout=10,
                server_settings={"application_name": f"evald {store.replica_id}"},
                init=store._init_connection,
                reset=_keep_session,
            )
            async with store._pool.acquire() as conn:
                await migrate(conn)
                await leases.register(conn, store.replica_id, store.owner, store.lease_s)
                store.members = await leases.live_members(conn)
            await store._feed.start()
        except StoreError:
            await store.close()
            raise
        except (*_LOST, asyncpg.PostgresError) as exc:
            await store.close()
            raise StoreError(f"cannot open the store {store.where}: {_reason(exc)}") from None
        store._maintenance = asyncio.create_task(store._maintain(), name="evald-store-leases")
        return store

    @classmethod
    async def from_url(cls, url: str, **options: Any) -> "PostgresStore":
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres") or not parts.path.strip("/"):
            raise StoreError(f"not a postgresql:// URL with a database name: {redact(url)!r}")
        return await cls.open(url, **options)

    async def _init_connection(self, conn: asyncpg.Connection) -> None:
        if self._count_statements:
            conn.add_query_logger(self._statement_sent)

    def _statement_sent(self, _query: object) -> None:
        self.statements += 1

    async def _connect(self) -> asyncpg.Connection:
        return await asyncpg.connect(self._url, timeout=10)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._maintenance is not None:
            self._maintenance.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._maintenance
        await self._feed.close()
        if self._pool is not None:
            with contextlib.suppress(*_LOST, asyncpg.PostgresError):
                async with self._pool.acquire(timeout=2) as conn:
                    await leases.leave(conn, self.replica_id, self.owner)
            with contextlib.suppress(*_LOST, asyncpg.PostgresError):
                await asyncio.wait_for(self._pool.close(), 5)
            self._pool.terminate()

    def problem(self) -> str | None:
        return None  # a database does not vanish like a file: see ``unavailable``

    def unavailable(self) -> str | None:
        return self._down

    # -- running operations --------------------------------------------------------------

    async def _run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``fn(conn, *args)`` on a pooled connection; waits out a lost database (up to
        ``wait_s``) and reruns a transaction PostgreSQL aborted for a deadlock."""
        deadline = time.monotonic() + self._wait_s
        delay = 0.05
        while True:
            if self._closed or self._pool is None:
                raise StoreError("the store is closed")
            try:
                async with self._pool.acquire() as conn:
                    try:
                        result = await fn(conn, *args)
                    except asyncpg.exceptions.InternalClientError:
                        conn.terminate()  # never back to the pool in that state
                        raise
                if self._down is not None:
                    self._back()
                return result
            except _CONFLICT:
                await asyncio.sleep(delay)
            except _LOST as exc:
                self._lost(exc)
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(
                        f"the database {self.where} is unreachable: {self._down}"
                    ) from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _lost(self, exc: BaseException) -> None:
        if self._down is None:
            _log.error("the database %s is unreachable: %s", self.where, _reason(exc))
        self._down = _reason(exc)

    def _back(self) -> None:
        _log.info("the database %s is reachable again", self.where)
        self._down = None

    async def _maintain(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self.maintain_once()
            except (*_LOST, StoreUnavailable) as exc:
                self._lost(exc)
            except Exception:  # the heartbeat must outlive any one failure: log, go on
                _log.exception("store maintenance failed")

    async def maintain_once(self) -> int:
        """One heartbeat: renew the lease, take back dead replicas' work, keep listening.
        Returns the subtasks given back to pending."""
        assert self._pool is not None
        async with self._pool.acquire(timeout=5) as conn:
            if not await leases.heartbeat(conn, self.replica_id, self.owner, self.lease_s):
                _log.warning("replica %s was taken for dead: joining again", self.replica_id)
                await leases.register(conn, self.replica_id, self.owner, self.lease_s)
            self._renewed_at = time.monotonic()
            self.members = await leases.live_members(conn)
            live = [owner for _, owner in self.members]
            requeued = await runs.requeue_running(conn, None, live, time.time())
            orphans = await leases.orphaned_scoring(conn, self.lease_s)
            if orphans:
                await notify(conn, [notice(SCORING, EVERYONE, r, t) for r, t in orphans])
            await leases.forget_dead(conn, 20 * self.lease_s)
        if requeued:
            _log.info("returned %d subtask(s) of dead replicas to pending", requeued)
        if not self._feed.alive():
            await self._feed.reconnect()
        if self._down is not None:
            self._back()
        return requeued

    async def capacity_shares(
        self,
        limits: Mapping[str, int],
        held: Mapping[str, int],
        rates: Mapping[str, SharedRate] | None = None,
        published: Mapping[str, float] | None = None,
    ) -> Shares:
        """One try, briefly: a replica that cannot reach the database keeps its shares
        until its lease would have expired, then fences itself (no share at all), since
        the others will have taken its shares back by then."""
        assert self._pool is not None
        try:
            # fail_after, not wait_for: the query runs in this task, so a cancel (the
            # engine stopping) ends it here, and no task is left behind to fail unseen.
            async with self._pool.acquire(timeout=self.lease_s / 2) as conn:
                with _closed_if_cut(conn), anyio.fail_after(self.lease_s / 2):
                    shares = await leases.capacity_shares(
                        conn, self.replica_id, self.owner, limits, held, rates, published
                    )
        except (*_LOST, asyncpg.PostgresError) as exc:
            if not isinstance(exc, TimeoutError):  # slow is not unreachable: health stays
                self._lost(exc)
            if time.monotonic() - self._renewed_at > self.lease_s - self.heartbeat_s:
                return leases.fenced(limits, rates)
            return self._shares or leases.fenced(limits, rates)
        self._shares = shares
        return shares

    # -- the change feed -----------------------------------------------------------------

    def changes(self) -> AsyncIterator[StoreChange]:
        return self._feed.changes()

    # -- datasets ------------------------------------------------------------------------

    async def create_dataset(
        self, dataset: DatasetRow, records: Iterable[RecordRow]
    ) -> tuple[DatasetRow, bool]:
        stream = _OneShot(records)  # streamed into COPY, never held whole in memory

        async def create(conn: asyncpg.Connection) -> tuple[DatasetRow, bool]:
            if stream.started:  # the connection was lost mid-upload: the records are gone
                raise StoreUnavailable(
                    f"the connection to the database {self.where} was lost during the "
                    "upload; upload it again (an upload that was stored is found again)"
                )
            return await datasets.create_dataset(conn, dataset, stream)

        return await self._run(create)

    async def find_dataset(self, tenant: str, name: str, version: str) -> DatasetRow | None:
        return await self._run(datasets.find_dataset, tenant, name, version)

    async def get_dataset(self, dataset_id: str) -> DatasetRow | None:
        return await self._run(datasets.get_dataset, dataset_id)

    async def list_datasets(
        self,
        tenant: str,
        after: tuple[float, str] | None,
        limit: int,
        *,
        name: str | None = None,
        task_type: TaskType | None = None,
    ) -> list[DatasetRow]:
        return await self._run(datasets.list_datasets, tenant, name, task_type, after, limit)

    async def read_records(self, dataset_id: str, idxs: Sequence[int]) -> list[RecordRow]:
        return await self._run(datasets.read_records, dataset_id, idxs)

    # -- runs ----------------------------------------------------------------------------

    async def create_run(
        self, run: NewRun, tasks: Sequence[NewTask], *, max_live_runs: int | None = None
    ) -> tuple[RunRow, bool]:
        return await self._run(runs.create_run, run, tasks, self._retain, max_live_runs, self.owner)

    async def create_rescore_run(
        self, run: NewRun, tasks: Sequence[RescoreTask], *, max_live_runs: int | None = None
    ) -> tuple[RunRow, bool]:
        return await self._run(
            runs.create_rescore_run,
            run,
            tasks,
            time.time(),
            self._retain,
            max_live_runs,
            self.owner,
        )

    async def get_run(self, run_id: str) -> RunRow | None:
        return await self._run(reads.get_run, run_id)

    async def list_runs(
        self,
        tenant: str,
        after: tuple[float, str] | None,
        limit: int,
        *,
        states: Sequence[RunState] = (),
    ) -> list[RunRow]:
        return await self._run(reads.list_runs, tenant, [s.value for s in states], after, limit)

    async def find_run_by_request(self, tenant: str, request_id: str) -> RunRow | None:
        return await self._run(reads.find_run_by_request, tenant, request_id)

    async def live_run_ids(self) -> list[str]:
        return await self._run(reads.live_run_ids)

    async def get_tasks(self, run_id: str) -> list[TaskRow]:
        return await self._run(reads.get_tasks, run_id)

    async def get_task(self, task_id: str) -> TaskRow | None:
        return await self._run(reads.get_task, task_id)

    # -- execution -----------------------------------------------------------------------

    async def claim_ready(self, run_id: str, model_id: str, limit: int, now: float) -> Claim:
        token = f"{self.owner}/{next(self._tokens)}"
        attempts = 0

        async def claim(conn: asyncpg.Connection) -> Claim:
            nonlocal attempts
            attempts += 1
            return await work.claim_ready(
                conn,
                run_id,
                model_id,
                limit,
                self.owner,
                token,
                now,
                self._retain,
                again=attempts > 1,
            )

        return await self._run(claim)

    async def record_outcomes(
        self, outcomes: Sequence[SubtaskOutcome], now: float
    ) -> CompletionReport:
        try:
            return await self._run(work.record_outcomes, outcomes, self.owner, now, self._retain)
        except _UNSTORABLE as exc:  # the transaction is rolled back
            raise UnstorableOutcome(exc) from exc

    async def requeue_running(self, *, owner: str | None, now: float) -> int:
        """``owner`` None (a start): the running rows of every owner that is not alive
        (this process registered before, so its previous life's rows count as dead)."""

        async def requeue(conn: asyncpg.Connection) -> int:
            live = [o for _, o in await leases.live_members(conn)]
            owners = None if owner is None else [owner]
            return await runs.requeue_running(conn, owners, live, now)

        return await self._run(requeue)

    async def cancel_run(
        self, run_id: str, now: float, *, reason: str | None = None
    ) -> TransitionReport:
        return await self._run(runs.cancel_run, run_id, now, self._retain, self.owner, reason)

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
        return await self._run(
            runs.retry_failed,
            run_id,
            task_ids,
            categories,
            now,
            self._retain,
            reasons,
            [s.value for s in states],
            self.owner,
        )

    async def fail_model_work(
        self, run_id: str, model_id: str, error: EvalError, now: float
    ) -> list[str]:
        return await self._run(runs.fail_model_work, run_id, model_id, error, now)

    # -- scoring and results -------------------------------------------------------------

    async def scoring_task_ids(self) -> list[str]:
        return await self._run(reads.scoring_task_ids)

    async def claim_scoring(self, task_id: str) -> bool:
        return await self._run(runs.claim_scoring, task_id, self.owner, leases.LIVE)

    async def task_subtasks(
        self,
        task_id: str,
        states: Sequence[SubtaskState],
        after_row: int,
        limit: int,
        *,
        phase: SubtaskPhase = SubtaskPhase.ANSWER,
    ) -> list[SubtaskRow]:
        return await self._run(reads.task_subtasks, task_id, states, after_row, limit, phase)

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
        return await self._run(
            reads.run_subtasks, run_id, task_id, states, after_row, limit, output_chars, phase
        )

    async def task_outputs(
        self, task_id: str, after_row: int, limit: int, *, unexecuted: bool = False
    ) -> list[TaskOutput]:
        return await self._run(reads.task_outputs, task_id, after_row, limit, unexecuted)

    async def store_executions(self, executions: Sequence[ExecutionRow]) -> None:
        await self._run(runs.store_executions, list(executions))

    async def profile_inputs(
        self, task_id: str, *, phase: SubtaskPhase = SubtaskPhase.ANSWER
    ) -> ProfileInputs:
        return await self._run(reads.profile_inputs, task_id, phase)

    async def task_verdicts(
        self, task_id: str, after_row: int, limit: int
    ) -> list[JudgeVerdictRow]:
        return await self._run(reads.task_verdicts, task_id, after_row, limit)

    async def finish_task(self, finish: TaskFinish) -> FinishReport:
        if not isinstance(finish.sample_scores, list | tuple):  # a retry reads them again
            finish = TaskFinish(**{**_fields(finish), "sample_scores": list(finish.sample_scores)})
        return await self._run(runs.finish_task, finish, self._retain, self.owner)

    async def store_sample_scores(self, scores: Iterable[SampleScoreRow]) -> None:
        # A list: a retried transaction reads the rows again.
        await self._run(runs.store_sample_scores, list(scores))

    async def read_results(self, run_id: str) -> list[tuple[str, Json]]:
        return await self._run(reads.read_results, run_id)

    async def recount_task(self, task_id: str) -> Counters:
        return await self._run(reads.recount_task, task_id)

    async def state_counts(self) -> StateCounts:
        return await self._run(reads.state_counts)

    # -- the response cache (shared by every replica) -----------------------------------

    async def cache_lookup(
        self, scope: str, keys: Sequence[str], now: float, ttl_s: float
    ) -> dict[str, CachedAnswer]:
        return await self._run(cache.cache_lookup, scope, keys, now, ttl_s)

    async def cache_put(
        self, entries: Sequence[CacheEntry], now: float, *, ttl_s: float, max_entries: int
    ) -> int:
        return await self._run(cache.cache_put, entries, now, ttl_s, max_entries)

    async def cache_size(self) -> int:
        return await self._run(cache.cache_size)

    # -- events --------------------------------------------------------------------------

    async def append_events(
        self, run_id: str, events: Sequence[NewEvent], *, live_only: bool = False
    ) -> list[EventRow]:
        return await self._run(runs.add_events, run_id, events, self._retain, live_only, self.owner)

    async def read_events(self, run_id: str, after_seq: int, limit: int) -> list[EventRow]:
        return await self._run(reads.read_events, run_id, after_seq, limit)


class _OneShot(Iterator[T]):
    """An iterator that remembers whether anyone started reading it."""

    def __init__(self, items: Iterable[T]) -> None:
        self._items = iter(items)
        self.started = False

    def __next__(self) -> T:
        self.started = True
        return next(self._items)


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """Pooled connections need no reset between operations (a round trip each): the
    store takes only transaction-scoped advisory locks, never LISTENs on them, and
    changes no session settings."""


def _fields(finish: TaskFinish) -> dict[str, Any]:
    return {name: getattr(finish, name) for name in TaskFinish.__slots__}


def _reason(exc: BaseException) -> str:
    """A one-line reason for a database error; never the URL (it may hold a password)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
