"""Run comparison: two runs' tasks matched, their samples paired by (record id, repeat
index), every headline metric compared with a paired bootstrap interval of the delta
and a paired test (``_paired``, ``_tests``), tasks matched by ``_matching``. Pure: no
store, no grpc."""

from evald_server.comparison._matching import ModelPair, TaskRef, match_tasks, pair_models
from evald_server.comparison._paired import (
    CONFIDENCE,
    DEFAULT_PERMUTATIONS,
    DEFAULT_RESAMPLES,
    UNPAIRED_IDS_SHOWN,
    compare_samples,
    pair_samples,
)
from evald_server.comparison._tests import PairedTest, mcnemar_exact, permutation_p_value
from evald_server.comparison._types import (
    DeltaInterval,
    MetricComparison,
    PairedSamples,
    RunComparison,
    TaskComparison,
    TaskPairing,
    UnmatchedTask,
)

__all__ = [
    "CONFIDENCE",
    "DEFAULT_PERMUTATIONS",
    "DEFAULT_RESAMPLES",
    "UNPAIRED_IDS_SHOWN",
    "DeltaInterval",
    "MetricComparison",
    "ModelPair",
    "PairedSamples",
    "PairedTest",
    "RunComparison",
    "TaskComparison",
    "TaskPairing",
    "TaskRef",
    "UnmatchedTask",
    "compare_samples",
    "match_tasks",
    "mcnemar_exact",
    "pair_models",
    "pair_samples",
    "permutation_p_value",
]
