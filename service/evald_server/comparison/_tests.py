"""The paired significance tests of a comparison, pure functions on numbers.

**McNemar, exact.** For a proportion compared on the same records (one sample per
record), only the discordant pairs carry information: ``b`` records right in the
baseline only, ``c`` right in the candidate only. Under H0 (no difference) ``b`` is
Binomial(b + c, 1/2); the two-sided p-value is ``min(1, 2 · P(X ≤ min(b, c)))``, the
definition of ``statsmodels.stats.contingency_tables.mcnemar(exact=True)``.

**Paired permutation (sign flip).** For any other metric — a mean of per-sample
scores, a ratio of sums (micro F1), a macro average — the pairing unit (a record, with
all its repeats) is swapped between the two runs at random; the metric difference
recomputed on each swap is the null distribution. The two-sided p-value is
``2 · min(P(T* ≤ t), P(T* ≥ t))`` capped at 1, with ties within a relative 100 ulp of
the observed value counted as equal and, for random (not exhaustive) swaps, the +1
correction of both counts — the definition of ``scipy.stats.permutation_test`` with
``permutation_type="samples"``. When every one of the 2^n swaps fits the budget they
are enumerated and the p-value is exact.
"""

import math
from collections.abc import Iterator
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


class PairedTest(StrEnum):
    """Which test produced a comparison's p-value."""

    MCNEMAR_EXACT = "mcnemar_exact"
    PERMUTATION = "permutation"


def _log_binom_pmf(k: NDArray[np.float64], n: int) -> FloatArray:
    lgamma = np.vectorize(math.lgamma, otypes=[np.float64])
    result: FloatArray = lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0) - n * math.log(2)
    return result


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the two discordant counts."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must not be negative, got {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    k = np.arange(min(b, c) + 1, dtype=np.float64)
    log_pmf = _log_binom_pmf(k, n)
    top = float(log_pmf.max())
    tail = math.exp(top) * float(np.exp(log_pmf - top).sum())
    return min(1.0, 2.0 * tail)


def exhaustive(n_units: int, budget: int) -> bool:
    """Whether all 2^n swap patterns fit ``budget`` (then they are enumerated)."""
    return n_units < 63 and (1 << n_units) <= budget


def sign_flips(
    n_units: int, budget: int, rng: np.random.Generator, *, chunk_rows: int
) -> Iterator[FloatArray]:
    """Swap masks (rows × units, 1 = swap this unit) in chunks of at most ``chunk_rows``:
    every one of the 2^n patterns when ``exhaustive``, else ``budget`` random ones."""
    if exhaustive(n_units, budget):
        total = 1 << n_units
        shifts = np.arange(n_units, dtype=np.int64)[None, :]
        for start in range(0, total, chunk_rows):
            codes = np.arange(start, min(total, start + chunk_rows), dtype=np.int64)[:, None]
            yield ((codes >> shifts) & 1).astype(np.float64)
        return
    for start in range(0, budget, chunk_rows):
        rows = min(chunk_rows, budget - start)
        yield rng.integers(0, 2, size=(rows, n_units)).astype(np.float64)


def permutation_p_value(null: FloatArray, observed: float, *, exact: bool) -> float:
    """Two-sided p-value of ``observed`` against its permutation distribution ``null``."""
    if null.size == 0:
        raise ValueError("the permutation distribution is empty")
    gamma = abs(np.finfo(np.float64).eps * 100 * observed)
    adjustment = 0 if exact else 1
    less = (np.count_nonzero(null <= observed + gamma) + adjustment) / (null.size + adjustment)
    greater = (np.count_nonzero(null >= observed - gamma) + adjustment) / (null.size + adjustment)
    return float(min(1.0, 2.0 * min(less, greater)))
