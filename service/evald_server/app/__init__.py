"""The application layer: the ``Evald`` facade the gRPC servicer calls, and the domain
objects it takes and returns (no proto here)."""

from evald_server.app._datasets import MAX_UPLOAD_BYTES
from evald_server.app._evald import Evald
from evald_server.app._pages import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from evald_server.app._types import Dataset, DatasetHeader, ModelInfo, Page, Run, Sample
from evald_server.engine import (
    DatasetRef,
    ExecutionProfile,
    LimitStats,
    ModelActivity,
    RetryPolicy,
    RunEvent,
    RunProgress,
    RunSpec,
    TaskEvaluation,
    TaskProgress,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "MAX_UPLOAD_BYTES",
    "Dataset",
    "DatasetHeader",
    "DatasetRef",
    "Evald",
    "ExecutionProfile",
    "LimitStats",
    "ModelActivity",
    "ModelInfo",
    "Page",
    "RetryPolicy",
    "Run",
    "RunEvent",
    "RunProgress",
    "RunSpec",
    "Sample",
    "TaskEvaluation",
    "TaskProgress",
]
