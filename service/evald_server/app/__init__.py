"""The application layer: the ``Evald`` facade the gRPC servicer calls, and the domain
objects it takes and returns (no proto here)."""

from evald_server.app._evald import Evald
from evald_server.app._types import Dataset, DatasetHeader, ModelInfo, Run, Sample
from evald_server.engine import (
    DatasetRef,
    ModelActivity,
    RetryPolicy,
    RunEvent,
    RunProgress,
    RunSpec,
    TaskEvaluation,
    TaskProgress,
)

__all__ = [
    "Dataset",
    "DatasetHeader",
    "DatasetRef",
    "Evald",
    "ModelActivity",
    "ModelInfo",
    "RetryPolicy",
    "Run",
    "RunEvent",
    "RunProgress",
    "RunSpec",
    "Sample",
    "TaskEvaluation",
    "TaskProgress",
]
