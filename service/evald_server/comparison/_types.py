"""What a comparison returns: frozen dataclasses, mapped 1:1 to ``evald.v1.RunComparison``."""

from dataclasses import dataclass
from enum import StrEnum

from evald_server.comparison._tests import PairedTest
from evald_server.domain import TaskType


class TaskPairing(StrEnum):
    """How the tasks of the two runs were matched."""

    MODEL_ID = "model_id"  # the same model id in both runs
    MODEL_POSITION = "model_position"  # the i-th model of one spec with the i-th of the other
    EXPLICIT = "explicit"  # the pairs the caller named


@dataclass(frozen=True, slots=True)
class DeltaInterval:
    """Paired percentile bootstrap interval of candidate − baseline."""

    lower: float
    upper: float
    confidence_level: float
    resamples: int
    seed: int


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One headline metric on the paired samples of both runs."""

    metric: str
    baseline: float
    candidate: float
    delta: float  # candidate − baseline
    interval: DeltaInterval
    p_value: float
    test: PairedTest
    records_improved: int
    records_worsened: int
    records_unchanged: int
    record_score: str  # the per-sample score the improved/worsened counts compare


@dataclass(frozen=True, slots=True)
class PairedSamples:
    """The outcome of matching two tasks' samples by (record id, repeat index)."""

    samples: int
    records: int
    baseline_only_records: int
    candidate_only_records: int
    baseline_only_record_ids: tuple[str, ...]  # at most ``UNPAIRED_IDS_SHOWN``
    candidate_only_record_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TaskComparison:
    baseline_task_id: str
    candidate_task_id: str
    baseline_model_id: str
    candidate_model_id: str
    dataset_name: str
    benchmark_version: str
    task_type: TaskType
    pairing: PairedSamples
    metrics: tuple[MetricComparison, ...]


@dataclass(frozen=True, slots=True)
class UnmatchedTask:
    """A task of one run with no counterpart in the other."""

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
