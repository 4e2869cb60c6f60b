"""Persistence: the ``Store`` port, its embedded SQLite implementation and the
PostgreSQL one for several replicas (``store.postgres``, imported only when a
``postgresql://`` URL is opened: its driver is the ``postgres`` extra).

One neutral middle, two thin dialects: the port (``_port``), the records
(``_records``), the row columns and decoders (``_rows``) and the pure planners
(``_plans``, ``_claims``, ``_outcomes``) exist once; ``sqlite/`` and ``postgres/`` keep
only their SQL text and I/O, in modules of the same names (``_store``, ``_runs``,
``_work``, ``_reads``, ``_datasets``, ``_cache``, ``_schema``, ``_common``), so a
change's twin is found by its file name."""

from evald_server.store._errors import (
    LiveRunLimitReached,
    StoreError,
    StoreUnavailable,
    UnstorableOutcome,
)
from evald_server.store._openers import STORE_OPENERS, open_store
from evald_server.store._port import Store
from evald_server.store._records import (
    CALLS_FINISH,
    CachedAnswer,
    CacheEntry,
    ChangeKind,
    Claim,
    ClaimedSubtask,
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
    RetryScheduled,
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
    subtask_public_id,
)
from evald_server.store.sqlite import (
    LATEST_VERSION,
    SqliteStore,
    StoreLocked,
    StoreLost,
    schema_version,
)

__all__ = [
    "CALLS_FINISH",
    "LATEST_VERSION",
    "STORE_OPENERS",
    "CacheEntry",
    "CachedAnswer",
    "ChangeKind",
    "Claim",
    "ClaimedSubtask",
    "CompletionReport",
    "DatasetRow",
    "EventRow",
    "ExecutionRow",
    "FinishReport",
    "Json",
    "JudgeVerdictRow",
    "LiveRunLimitReached",
    "NewEvent",
    "NewRun",
    "NewTask",
    "ProfileInputs",
    "RecordRow",
    "RescoreTask",
    "RetryScheduled",
    "RunRow",
    "SampleScoreRow",
    "SharedRate",
    "Shares",
    "SqliteStore",
    "StateCounts",
    "Store",
    "StoreChange",
    "StoreError",
    "StoreLocked",
    "StoreLost",
    "StoreUnavailable",
    "SubtaskOutcome",
    "SubtaskRow",
    "TaskFinish",
    "TaskOutput",
    "TaskRow",
    "TransitionReport",
    "UnstorableOutcome",
    "open_store",
    "schema_version",
    "subtask_public_id",
]
