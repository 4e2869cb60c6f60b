"""The typed Python client of evald (``evald.v1.EvaluationService``).

``AsyncEvaldClient`` for asyncio code, ``EvaldClient`` for blocking code; both return
the frozen dataclasses below and raise the ``EvaldError`` tree. The generated protobuf
code stays behind this package::

    async with AsyncEvaldClient("127.0.0.1:50051", token=token) as evald:
        await evald.upload_dataset(name="qa", version="1.0.0", task_type="qa", path=p)
        run = await evald.create_run(models=["m"], datasets=[("qa", "1.0.0")])
        async for event in evald.watch(run.run_id):  # resumes by itself on UNAVAILABLE
            ...
        results = await evald.results(run.run_id)
"""

from evald_client._channel import TlsConfig
from evald_client._client import AsyncEvaldClient
from evald_client._enums import (
    ErrorCategory,
    IntervalMethod,
    ResultStatus,
    RunState,
    SubtaskState,
    TaskState,
    TaskType,
)
from evald_client._errors import (
    AlreadyExists,
    DatasetInvalid,
    DeadlineExceeded,
    EvaldError,
    FailedPrecondition,
    FieldViolation,
    InternalError,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ProviderError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from evald_client._events import (
    Heartbeat,
    ModelActivity,
    Progress,
    RunEvent,
    SampleFailed,
    StateChanged,
    TaskScored,
)
from evald_client._models import (
    Dataset,
    DatasetRef,
    EvalError,
    GenerationParams,
    Model,
    RetryOutcome,
    RetryPolicy,
    Run,
    RunProgress,
    RunSpec,
    Sample,
    SubtaskCounts,
    TaskProgress,
)
from evald_client._results import (
    BenchmarkRef,
    ClassificationPayload,
    ClassMetrics,
    ConfusionMatrix,
    EntityTypeMetrics,
    ExecutionProfile,
    GenerationPayload,
    MatchModeStats,
    MetricInterval,
    MetricUncertainty,
    ModelIdentity,
    NerPayload,
    Payload,
    Provenance,
    QaPayload,
    RepeatStats,
    RougeScore,
    SummarizationPayload,
    TaskResult,
    WorstExample,
)
from evald_client._sync import EvaldClient
from evald_client._watch import ReconnectPolicy

__all__ = [
    "AlreadyExists",
    "AsyncEvaldClient",
    "BenchmarkRef",
    "ClassMetrics",
    "ClassificationPayload",
    "ConfusionMatrix",
    "Dataset",
    "DatasetInvalid",
    "DatasetRef",
    "DeadlineExceeded",
    "EntityTypeMetrics",
    "ErrorCategory",
    "EvalError",
    "EvaldClient",
    "EvaldError",
    "ExecutionProfile",
    "FailedPrecondition",
    "FieldViolation",
    "GenerationParams",
    "GenerationPayload",
    "Heartbeat",
    "InternalError",
    "IntervalMethod",
    "InvalidArgument",
    "MatchModeStats",
    "MetricInterval",
    "MetricUncertainty",
    "Model",
    "ModelActivity",
    "ModelIdentity",
    "NerPayload",
    "NotFound",
    "OutOfRange",
    "Payload",
    "PermissionDenied",
    "Progress",
    "Provenance",
    "ProviderError",
    "QaPayload",
    "ReconnectPolicy",
    "RepeatStats",
    "ResourceExhausted",
    "ResultStatus",
    "RetryOutcome",
    "RetryPolicy",
    "RougeScore",
    "Run",
    "RunEvent",
    "RunProgress",
    "RunSpec",
    "RunState",
    "Sample",
    "SampleFailed",
    "StateChanged",
    "SubtaskCounts",
    "SubtaskState",
    "SummarizationPayload",
    "TaskProgress",
    "TaskResult",
    "TaskScored",
    "TaskState",
    "TaskType",
    "TlsConfig",
    "Unauthenticated",
    "Unavailable",
    "WorstExample",
]
