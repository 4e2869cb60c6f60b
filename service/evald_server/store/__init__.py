"""Persistence: the ``Store`` port, its embedded SQLite implementation and the
PostgreSQL one for several replicas (``store._postgres``, imported only when a
``postgresql://`` URL is opened: its driver is the ``postgres`` extra)."""

from evald_server.store._errors import LiveRunLimitReached, StoreError
from evald_server.store._openers import STORE_OPENERS, open_store
from evald_server.store._port import Store
from evald_server.store._records import (
    ChangeKind,
    Claim,
    ClaimedSubtask,
    CompletionReport,
    DatasetRow,
    EventRow,
    FinishReport,
    Json,
    NewEvent,
    NewRun,
    NewTask,
    ProfileInputs,
    RecordRow,
    RetryScheduled,
    RunRow,
    SampleScoreRow,
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
from evald_server.store._schema import LATEST_VERSION, schema_version
from evald_server.store._sqlite import SqliteStore
from evald_server.store._store_file import StoreLocked, StoreLost

__all__ = [
    "LATEST_VERSION",
    "STORE_OPENERS",
    "ChangeKind",
    "Claim",
    "ClaimedSubtask",
    "CompletionReport",
    "DatasetRow",
    "EventRow",
    "FinishReport",
    "Json",
    "LiveRunLimitReached",
    "NewEvent",
    "NewRun",
    "NewTask",
    "ProfileInputs",
    "RecordRow",
    "RetryScheduled",
    "RunRow",
    "SampleScoreRow",
    "SqliteStore",
    "StateCounts",
    "Store",
    "StoreChange",
    "StoreError",
    "StoreLocked",
    "StoreLost",
    "SubtaskOutcome",
    "SubtaskRow",
    "TaskFinish",
    "TaskOutput",
    "TaskRow",
    "TransitionReport",
    "open_store",
    "schema_version",
    "subtask_public_id",
]
