"""A comparison of two runs (``CompareRuns``), as frozen dataclasses."""

from dataclasses import dataclass
from enum import StrEnum

from evald_client._enums import TaskType
from evald_client._results import MetricInterval


class TaskPairing(StrEnum):
    """How the two runs' models were paired before datasets were matched."""

    UNSPECIFIED = "unspecified"
    MODEL_ID = "model_id"
    MODEL_POSITION = "model_position"
    EXPLICIT = "explicit"


class PairedTest(StrEnum):
    """The paired test behind a comparison's p-value."""

    UNSPECIFIED = "unspecified"
    MCNEMAR_EXACT = "mcnemar_exact"
    PERMUTATION = "permutation"


@dataclass(frozen=True, slots=True)
class ModelPair:
    """Compare ``baseline_model_id`` of the baseline run with ``candidate_model_id``."""

    baseline_model_id: str
    candidate_model_id: str


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One headline metric on the samples both runs scored; ``delta`` = candidate − baseline."""

    metric: str
    baseline_value: float
    candidate_value: float
    delta: float
    delta_interval: MetricInterval
    p_value: float
    test: PairedTest
    records_improved: int
    records_worsened: int
    records_unchanged: int
    record_score: str

    def significant(self, alpha: float) -> bool:
        """Whether the delta is significant at level ``alpha`` (two-sided)."""
        return self.p_value < alpha


@dataclass(frozen=True, slots=True)
class TaskComparison:
    baseline_task_id: str
    candidate_task_id: str
    baseline_model_id: str
    candidate_model_id: str
    dataset_name: str
    benchmark_version: str
    task_type: TaskType
    paired_samples: int
    paired_records: int
    baseline_only_records: int
    candidate_only_records: int
    baseline_only_record_ids: tuple[str, ...]
    candidate_only_record_ids: tuple[str, ...]
    metrics: tuple[MetricComparison, ...]

    def metric(self, name: str) -> MetricComparison | None:
        return next((m for m in self.metrics if m.metric == name), None)


@dataclass(frozen=True, slots=True)
class UnmatchedTask:
    """A task of one run with no counterpart in the other (not compared)."""

    run_id: str
    task_id: str
    model_id: str
    dataset_name: str
    benchmark_version: str


@dataclass(frozen=True, slots=True)
class RunComparison:
    baseline_run_id: str
    candidate_run_id: str
    task_pairing: TaskPairing
    tasks: tuple[TaskComparison, ...]
    unmatched_tasks: tuple[UnmatchedTask, ...]
    confidence_level: float
    resamples: int
    permutations: int
    seed: int
