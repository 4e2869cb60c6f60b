"""The application layer: the run, dataset and comparison services the gRPC servicer
calls, ``Evald`` (the composition root that builds, starts and drains them), and the
domain objects they take and return (no proto here)."""

from evald_server.app._composition import Evald
from evald_server.app._rescoring import RescoreSettings
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
    "RescoreSettings",
    "RetryPolicy",
    "Run",
    "RunEvent",
    "RunProgress",
    "RunSpec",
    "Sample",
    "TaskEvaluation",
    "TaskProgress",
]
