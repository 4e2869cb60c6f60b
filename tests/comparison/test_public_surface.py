"""The comparison package's public surface is pinned, and it stays pure (no grpc, no store)."""

import subprocess
import sys

import evald_server.comparison as comparison


def test_public_surface() -> None:
    assert comparison.__all__ == [
        "CONFIDENCE", "DEFAULT_PERMUTATIONS", "DEFAULT_RESAMPLES", "UNPAIRED_IDS_SHOWN",
        "DeltaInterval", "MetricComparison", "ModelPair", "PairedSamples", "PairedTest",
        "RunComparison", "TaskComparison", "TaskPairing", "TaskRef", "UnmatchedTask",
        "compare_samples", "match_tasks", "mcnemar_exact", "pair_models", "pair_samples",
        "permutation_p_value",
    ]  # fmt: skip


def test_the_comparison_imports_neither_grpc_nor_the_store() -> None:
    code = (
        "import sys, evald_server.comparison; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'grpc' "
        "or m.startswith(('evald_server.store', 'evald_server.api', 'evald_server.engine'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout
