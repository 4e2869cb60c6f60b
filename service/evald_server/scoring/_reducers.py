"""Reducers over repeats: what a record's n samples say, then the mean over records.

For a record with n samples of which c are correct:

* **pass@k** — the chance that at least one of k samples drawn without replacement
  from the n is correct, the unbiased estimator of Chen et al. 2021 ("Evaluating Large
  Language Models Trained on Code", fig. 3): ``1 - C(n-c, k) / C(n, k)``, computed as
  the paper does, ``1 - prod(1 - k / arange(n-c+1, n+1))``, which never forms the
  binomials (C(200, 100) overflows a float). Not ``1 - (1 - c/n)^k`` (biased) and not
  pass@n reported as pass@k.
* **pass^k** — the chance that all k drawn samples are correct (a consistency measure,
  τ-bench's pass^k): ``C(c, k) / C(n, k) = prod((c - i) / (n - i) for i < k)``.
* **majority** — whether the record's most frequent answer (ties: the one given
  first) is correct, as in self-consistency; it needs each sample's answer key.
* **mean** — c / n (for any per-sample score: its mean).

The metric is the mean over records. A record with fewer than k samples (repeats that
failed for good) cannot give pass@k or pass^k: it is left out and counted in
``skipped``. The 95 % interval is the percentile bootstrap over records (problems), as
``scoring._intervals`` does it for every headline metric: one unit per record, the
same seed and resamples.
"""

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from evald_server.scoring._intervals import (
    FloatArray,
    bootstrap_distribution,
    percentile_interval,
)
from evald_server.scoring._types import MetricInterval

DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0


class Reducer(StrEnum):
    PASS_AT_K = "pass@k"
    PASS_HAT_K = "pass^k"
    MAJORITY = "majority"
    MEAN = "mean"


@dataclass(frozen=True, slots=True)
class RecordSamples:
    """One record's repeats: whether each was correct, and (for majority) its answer."""

    record_id: str
    correct: tuple[bool, ...]
    answers: tuple[str, ...] | None = None  # a normalised answer key per sample


@dataclass(frozen=True, slots=True)
class ReducedMetric:
    name: str  # "pass@5", "pass^3", "majority", "mean"
    value: float
    interval: MetricInterval
    records: int  # records the value is the mean over
    skipped: int  # records with fewer than k samples, left out


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one record: 1 - C(n-c, k) / C(n, k)."""
    _check_counts(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k of one record: C(c, k) / C(n, k), all k drawn samples correct."""
    _check_counts(n, c, k)
    if c < k:
        return 0.0
    steps = np.arange(k)
    return float(np.prod((c - steps) / (n - steps)))


def majority_correct(answers: Sequence[str], correct: Sequence[bool]) -> bool:
    """Whether the most frequent answer (ties: the one given first) is correct."""
    if len(answers) != len(correct) or not answers:
        raise ValueError("majority needs one answer per sample, and at least one sample")
    top = Counter(answers).most_common(1)[0][0]  # Counter keeps first-seen order in ties
    return bool(correct[answers.index(top)])


def reduce_records(
    records: Sequence[RecordSamples],
    reducer: Reducer,
    k: int | None = None,
    *,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> ReducedMetric:
    """The mean over records of ``reducer`` (pass@k and pass^k need ``k``), with its
    bootstrap interval over records. Raises ``ValueError`` when no record qualifies."""
    if reducer in (Reducer.PASS_AT_K, Reducer.PASS_HAT_K):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"{reducer.value} needs k >= 1, got {k!r}")
        name = reducer.value.replace("k", str(k))
    elif k is not None:
        raise ValueError(f"{reducer.value} takes no k")
    else:
        name = reducer.value
    values: list[float] = []
    skipped = 0
    for record in records:
        n, c = len(record.correct), sum(record.correct)
        if reducer is Reducer.PASS_AT_K and k is not None:
            if n < k:
                skipped += 1
                continue
            values.append(pass_at_k(n, c, k))
        elif reducer is Reducer.PASS_HAT_K and k is not None:
            if n < k:
                skipped += 1
                continue
            values.append(pass_hat_k(n, c, k))
        elif reducer is Reducer.MAJORITY:
            if record.answers is None:
                raise ValueError(f"record {record.record_id!r}: majority needs its answers")
            values.append(float(majority_correct(record.answers, record.correct)))
        elif n:
            values.append(c / n)
        else:
            skipped += 1
    if not values:
        raise ValueError(f"{name}: no record has enough samples ({skipped} left out)")
    per_record = np.asarray(values, dtype=np.float64)
    point = float(per_record.mean())
    return ReducedMetric(
        name=name,
        value=point,
        interval=_bootstrap(per_record, point, seed=seed, resamples=resamples),
        records=len(values),
        skipped=skipped,
    )


def _bootstrap(
    per_record: FloatArray, point: float, *, seed: int, resamples: int
) -> MetricInterval:
    count = per_record.size
    units = np.arange(count, dtype=np.intp)

    def mean(weights: FloatArray) -> dict[str, FloatArray]:
        return {"value": (weights @ per_record) / count}

    distribution = bootstrap_distribution(units, count, mean, seed=seed, resamples=resamples)
    return percentile_interval(distribution["value"], point, seed=seed, resamples=resamples)


def _check_counts(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
