"""The evaluation engine: dispatch under three limits, retries, cancel, resume, scoring
as each task finishes, and per-run event streams. Imports no grpc."""

from evald_server.engine._cost import RunBudget
from evald_server.engine._dataset_options import DatasetOptions
from evald_server.engine._engine import Engine
from evald_server.engine._events import EventHub, RunEvent
from evald_server.engine._judge_results import AnswerJudgement
from evald_server.engine._judge_spec import DEFAULT_RUBRIC, JudgeSpec
from evald_server.engine._limits import (
    MODEL_LIMIT,
    RUN_LIMIT,
    SERVER_LIMIT,
    Limit,
    Limiter,
    LimitStats,
    check_limit,
)
from evald_server.engine._profile import percentile
from evald_server.engine._progress import (
    ModelActivity,
    RunProgress,
    TaskProgress,
)
from evald_server.engine._prompting import (
    ShotSourceProblem,
    effective_options,
    shot_source,
    task_prompt,
)
from evald_server.engine._rate_control import RateStats
from evald_server.engine._reducer_spec import ReducerSpec, task_type_problems
from evald_server.engine._results import (
    CONTRACT_VERSION,
    BenchmarkRef,
    ExecutionProfile,
    JudgeProvenance,
    ModelIdentity,
    Provenance,
    TaskEvaluation,
)
from evald_server.engine._retry_policy import CLASS_BUDGETS, RetryPolicy, retry_class
from evald_server.engine._spec import DatasetRef, RunSpec, generation_params
from evald_server.engine._task_models import TaskModels
from evald_server.engine._task_scoring import ScoringPort

__all__ = [
    "CLASS_BUDGETS",
    "CONTRACT_VERSION",
    "DEFAULT_RUBRIC",
    "MODEL_LIMIT",
    "RUN_LIMIT",
    "SERVER_LIMIT",
    "AnswerJudgement",
    "BenchmarkRef",
    "DatasetOptions",
    "DatasetRef",
    "Engine",
    "EventHub",
    "ExecutionProfile",
    "JudgeProvenance",
    "JudgeSpec",
    "Limit",
    "LimitStats",
    "Limiter",
    "ModelActivity",
    "ModelIdentity",
    "Provenance",
    "RateStats",
    "ReducerSpec",
    "RetryPolicy",
    "RunBudget",
    "RunEvent",
    "RunProgress",
    "RunSpec",
    "ScoringPort",
    "ShotSourceProblem",
    "TaskEvaluation",
    "TaskModels",
    "TaskProgress",
    "check_limit",
    "effective_options",
    "generation_params",
    "percentile",
    "retry_class",
    "shot_source",
    "task_prompt",
    "task_type_problems",
]
