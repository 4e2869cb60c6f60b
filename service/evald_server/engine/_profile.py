"""The ExecutionProfile of a task, from what the store aggregated over its subtasks."""

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from evald_server.engine._results import ExecutionProfile
from evald_server.store import ProfileInputs

Sorted = Sequence[float] | NDArray[np.float64]


def percentile(sorted_values: Sorted, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) of sorted values."""
    if len(sorted_values) == 0:
        raise ValueError("percentile of no values")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    weight = position - low
    return float(sorted_values[low] * (1.0 - weight) + sorted_values[high] * weight)


def _ms(values: Sorted, q: float) -> float | None:
    return percentile(values, q) * 1000.0 if len(values) else None


def _sorted(values: Sequence[float]) -> NDArray[np.float64]:
    # A sorted copy as one array: sorted() of 1,000,000 timings is 32 MB of floats.
    return np.sort(np.asarray(values, dtype=np.float64))


def _mean(sorted_values: NDArray[np.float64]) -> float:
    # Summed one after the other in sorted order, as sum() over the sorted list did.
    return float(np.cumsum(sorted_values)[-1]) / len(sorted_values)


def build_profile(
    inputs: ProfileInputs, *, scoring_time_s: float, priced: bool = True
) -> ExecutionProfile:
    """``priced``: the task's model had a price when the task was created."""
    latencies = _sorted(inputs.latencies_s)
    ttfts = _sorted(inputs.ttfts_s)
    wall = 0.0
    if inputs.started_at is not None and inputs.finished_at is not None:
        wall = max(0.0, inputs.finished_at - inputs.started_at)
    counters = inputs.counters
    return ExecutionProfile(
        samples_total=counters.total,
        samples_succeeded=counters.succeeded,
        samples_failed=counters.failed_permanent,
        samples_cancelled=counters.cancelled,
        wall_time_s=wall,
        latency_mean_ms=_mean(latencies) * 1000.0 if len(latencies) else None,
        latency_p50_ms=_ms(latencies, 50),
        latency_p90_ms=_ms(latencies, 90),
        latency_p99_ms=_ms(latencies, 99),
        ttft_p50_ms=_ms(ttfts, 50),
        ttft_p99_ms=_ms(ttfts, 99),
        prompt_tokens=inputs.prompt_tokens,
        completion_tokens=inputs.completion_tokens,
        tokens_per_second=inputs.completion_tokens / wall if wall > 0 else 0.0,
        requests=inputs.requests,
        retries=inputs.retries,
        rate_limited=inputs.rate_limited,
        effective_concurrency=inputs.call_time_s / wall if wall > 0 else 0.0,
        scoring_time_s=scoring_time_s,
        samples_truncated=inputs.truncated,
        samples_empty=inputs.empty,
        samples_without_usage=inputs.usage_unknown,
        decode_tokens_per_second=(
            inputs.decode_tokens / inputs.decode_time_s if inputs.decode_time_s > 0 else None
        ),
        cost=dataclasses.replace(inputs.cost, priced=priced and inputs.cost.priced),
        cache_hits=inputs.cache_hits,
    )
