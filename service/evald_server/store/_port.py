"""The Store port: everything the engine and the application need from persistence.

``SqliteStore`` is the embedded implementation; ``PostgresStore`` serves several
replicas on one database, without engine changes:

* work is *claimed* (``claim_ready``: ``SELECT … FOR UPDATE SKIP LOCKED`` there) by an
  ``owner``, and outcomes apply only to rows that owner still holds, so a row another
  replica took back is never overwritten;
* ``requeue_running(owner=None)`` gives back the rows of owners that are not alive: on
  SQLite every row (the single process restarting), on PostgreSQL those of replicas
  whose lease expired (its own heartbeat does the same for replicas that die later);
* event seqs are assigned inside the transaction that appends them (``runs.last_seq``),
  never by the process, so any replica can serve a watch;
* every mutation that can finish a task returns the tasks it moved to ``scoring``, and
  ``scoring_task_ids`` finds them again after a crash; ``claim_scoring`` takes a task's
  scoring job under the owner's lease, so each task is scored once;
* ``changes`` yields what *other* processes changed that this one must act on (runs
  created, cancelled, retried or finished elsewhere, new events, freed scoring jobs);
  on SQLite, one process per file, it yields nothing.
"""

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Protocol

from evald_server.domain import (
    Counters,
    EvalError,
    RunState,
    SubtaskPhase,
    SubtaskState,
    TaskType,
)
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


class Store(Protocol):
    """Durable state of datasets, runs, tasks, subtasks, events and results."""

    owner: str  # this process's claim owner id

    async def close(self) -> None: ...
    def problem(self) -> str | None:
        """Why the store can no longer be written (e.g. its file was deleted), or None."""
        ...

    def unavailable(self) -> str | None:
        """Why the database cannot be reached now (it may come back), or None."""
        ...

    def changes(self) -> AsyncIterator[StoreChange]:
        """Changes made by other processes sharing the store, as they commit."""
        ...

    async def capacity_shares(
        self,
        limits: Mapping[str, int],
        held: Mapping[str, int],
        rates: Mapping[str, SharedRate] | None = None,
        published: Mapping[str, float] | None = None,
    ) -> Shares:
        """This process's share of each global concurrency limit (``limits``, given the
        slots it may be using now, ``held``) and of each shared rate (``rates``); it
        publishes ``published`` for the other replicas and gets theirs summed. The whole
        of every limit on SQLite."""
        ...

    # Datasets (immutable once created).
    async def create_dataset(
        self, dataset: DatasetRow, records: Iterable[RecordRow]
    ) -> tuple[DatasetRow, bool]: ...
    async def find_dataset(self, tenant: str, name: str, version: str) -> DatasetRow | None: ...
    async def get_dataset(self, dataset_id: str) -> DatasetRow | None: ...
    async def list_datasets(
        self,
        tenant: str,
        after: tuple[float, str] | None,
        limit: int,
        *,
        name: str | None = None,
        task_type: TaskType | None = None,
    ) -> list[DatasetRow]: ...
    async def read_records(self, dataset_id: str, idxs: Sequence[int]) -> list[RecordRow]: ...

    # Runs: creation, reads.
    async def create_run(
        self, run: NewRun, tasks: Sequence[NewTask], *, max_live_runs: int | None = None
    ) -> tuple[RunRow, bool]: ...
    async def create_rescore_run(
        self, run: NewRun, tasks: Sequence[RescoreTask], *, max_live_runs: int | None = None
    ) -> tuple[RunRow, bool]:
        """A new run over copies of finished tasks' terminal answers, its tasks in
        ``scoring``: one transaction (``RescoreTask``)."""
        ...

    async def get_run(self, run_id: str) -> RunRow | None: ...
    async def list_runs(
        self,
        tenant: str,
        after: tuple[float, str] | None,
        limit: int,
        *,
        states: Sequence[RunState] = (),
    ) -> list[RunRow]: ...
    async def find_run_by_request(self, tenant: str, request_id: str) -> RunRow | None: ...
    async def live_run_ids(self) -> list[str]: ...
    async def get_tasks(self, run_id: str) -> list[TaskRow]: ...
    async def get_task(self, task_id: str) -> TaskRow | None: ...

    # Execution.
    async def claim_ready(self, run_id: str, model_id: str, limit: int, now: float) -> Claim: ...
    async def record_outcomes(
        self, outcomes: Sequence[SubtaskOutcome], now: float
    ) -> CompletionReport:
        """Record a batch of outcomes in one transaction; ``UnstorableOutcome`` when a
        value of one of them cannot be stored (nothing of the batch is)."""
        ...

    async def requeue_running(self, *, owner: str | None, now: float) -> int: ...
    async def cancel_run(
        self, run_id: str, now: float, *, reason: str | None = None
    ) -> TransitionReport: ...
    async def retry_failed(
        self,
        run_id: str,
        task_ids: Sequence[str],
        categories: Sequence[str],
        now: float,
        *,
        reasons: Sequence[str] = (),
        states: Sequence[SubtaskState] = (SubtaskState.FAILED_PERMANENT,),
    ) -> TransitionReport: ...
    async def fail_model_work(
        self, run_id: str, model_id: str, error: EvalError, now: float
    ) -> list[str]: ...

    # Scoring and results.
    async def scoring_task_ids(self) -> list[str]: ...
    async def claim_scoring(self, task_id: str) -> bool:
        """Take the task's scoring job (it is in ``scoring`` and no live scorer holds
        it); False: not this process's to score."""
        ...

    async def task_subtasks(
        self,
        task_id: str,
        states: Sequence[SubtaskState],
        after_row: int,
        limit: int,
        *,
        phase: SubtaskPhase = SubtaskPhase.ANSWER,
    ) -> list[SubtaskRow]: ...
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
        """``output_chars``: read at most that many characters of each output (its full
        size in bytes is then in ``SubtaskRow.output_bytes``). Only subtasks of
        ``phase`` (the answers, unless asked for the judge subtasks; None: both), in row
        id order."""
        ...

    async def task_outputs(
        self, task_id: str, after_row: int, limit: int, *, unexecuted: bool = False
    ) -> list[TaskOutput]:
        """Succeeded answers (phase ANSWER) only; ``unexecuted``: only those of a code
        task whose program has not run yet (no stored execution)."""
        ...

    async def store_executions(self, executions: Sequence[ExecutionRow]) -> None:
        """Code samples' runs in the sandbox: each row sets its subtask's execution."""
        ...

    async def profile_inputs(
        self, task_id: str, *, phase: SubtaskPhase = SubtaskPhase.ANSWER
    ) -> ProfileInputs:
        """Aggregates over one phase's subtasks; ``counters`` count that phase only."""
        ...

    async def task_verdicts(
        self, task_id: str, after_row: int, limit: int
    ) -> list[JudgeVerdictRow]:
        """One page (by row id) of a task's judge subtasks."""
        ...

    async def finish_task(self, finish: TaskFinish) -> FinishReport: ...
    async def store_sample_scores(self, scores: Iterable[SampleScoreRow]) -> None:
        """Per-sample scores of subtasks scored before their task's end (page by page);
        each row replaces the subtask's scores, correct and judgement."""
        ...

    async def read_results(self, run_id: str) -> list[tuple[str, Json]]: ...
    async def recount_task(self, task_id: str) -> Counters: ...
    async def state_counts(self) -> StateCounts: ...

    # The response cache (opt-in per run).
    async def cache_lookup(
        self, scope: str, keys: Sequence[str], now: float, ttl_s: float
    ) -> dict[str, CachedAnswer]:
        """The unexpired entries of ``scope`` among ``keys`` (created after now - ttl_s);
        marks them used (least recently used entries are evicted first)."""
        ...

    async def cache_put(
        self, entries: Sequence[CacheEntry], now: float, *, ttl_s: float, max_entries: int
    ) -> int:
        """Keep entries (replacing same (scope, key)); delete expired ones and the least
        recently used beyond ``max_entries``; returns how many were deleted."""
        ...

    async def cache_size(self) -> int: ...

    # Events.
    async def append_events(
        self, run_id: str, events: Sequence[NewEvent], *, live_only: bool = False
    ) -> list[EventRow]:
        """Append with the next seqs; ``live_only`` appends nothing to a finished run."""
        ...

    async def read_events(self, run_id: str, after_seq: int, limit: int) -> list[EventRow]: ...
