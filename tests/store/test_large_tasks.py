"""What a store keeps in memory for a large task must not grow by a Python object per
subtask: a 1,000,000-subtask run is read for its profile and scores in one server."""

import time
import tracemalloc

from evald_server.domain import Counters, TaskState, TaskType
from evald_server.store import ProfileInputs, TaskRow


def _task() -> TaskRow:
    return TaskRow(
        task_id="t",
        run_id="r",
        ordinal=0,
        model_id="m",
        model={},
        dataset_id="d",
        state=TaskState.SCORING,
        counters=Counters(total=1),
        started_at=time.time(),
        finished_at=time.time(),
        result_status=None,
        dataset_name="d",
        dataset_version="1.0.0",
        task_type=TaskType.CLASSIFICATION,
    )


def test_profile_inputs_keep_the_timings_as_columns() -> None:
    n = 100_000
    rows = ((0.001 * (i % 997), None if i % 3 else 0.0005 * (i % 89)) for i in range(n))
    tracemalloc.start()
    try:
        inputs = ProfileInputs.from_sums(
            Counters(total=n, succeeded=n),
            _task(),
            sums=(n, 0, 0, 0, 0, 0.0, 0, None),
            timings=rows,
            answers=(0, 0, 0, 0, 0.0),
            cost=(0, 0, 0, 0),
            reasons=(),
        )
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(inputs.latencies_s) == n
    assert len(inputs.ttfts_s) == len(range(0, n, 3))
    assert list(inputs.ttfts_s[:2]) == [0.0, 0.0005 * 3]
    # Two doubles per answer, with the arrays' growth slack: tuples of float objects
    # were 32 bytes per value, and the rows read into a list before them 100 more.
    assert held < 24 * n
    assert peak < 32 * n
