"""The reducers of a run spec over one task's samples: its ``SampleCorrectness``
grouped by record, then each reducer (``_reducers``) over the records, all of them
under one shared bootstrap."""

from collections.abc import Sequence
from typing import Any

import numpy as np

from evald_server.scoring._correctness import SampleCorrectness
from evald_server.scoring._intervals import (
    FloatArray,
    IntArray,
    bootstrap_distribution,
    percentile_interval,
)
from evald_server.scoring._reducers import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    RecordSamples,
    ReducedMetric,
    Reducer,
    majority_correct,
    pass_at_k,
    pass_hat_k,
)

_NONE, _TRUE = -1, 1
BoolArray = np.ndarray[Any, np.dtype[np.bool_]]


def record_samples(correctness: SampleCorrectness) -> list[RecordSamples]:
    """One ``RecordSamples`` per record with a sample that has a correct bool, in
    unit order; each with its samples' answer keys when every one has one."""
    keep = np.flatnonzero(correctness.correct != _NONE)
    order = keep[np.argsort(correctness.units[keep], kind="stable")]
    units = correctness.units[order].tolist()
    correct = (correctness.correct[order] == _TRUE).tolist()
    answers = None if correctness.answers is None else correctness.answers[order].tolist()
    grouped: list[RecordSamples] = []
    start = 0
    while start < len(units):
        end = start
        while end < len(units) and units[end] == units[start]:
            end += 1
        keys = None
        if answers is not None and all(a >= 0 for a in answers[start:end]):
            keys = tuple(correctness.answer_keys[a] for a in answers[start:end])
        grouped.append(RecordSamples(str(units[start]), tuple(correct[start:end]), answers=keys))
        start = end
    return grouped


def reduce_samples(
    correctness: SampleCorrectness,
    asked: Sequence[tuple[Reducer, int | None]],
    *,
    records_expected: int = 0,
    seed: int = DEFAULT_SEED,
    resamples: int = DEFAULT_RESAMPLES,
) -> tuple[ReducedMetric, ...]:
    """Each reducer of ``asked`` over the task's records, in the order asked.

    The per-record values are ``_reducers``'s (pass@k and pass^k computed once per
    distinct (n, c)); the intervals come from one percentile bootstrap over the records
    shared by every reducer (the same draws: 5 reducers cost one bootstrap, not five),
    each the mean over the drawn records it applies to. A reducer no record qualifies
    for is left out of the answer. ``records_expected`` is the dataset's record count:
    a record none of whose samples succeeded is counted in ``skipped`` too."""
    keep = correctness.correct != _NONE
    present, record_of = np.unique(correctness.units[keep], return_inverse=True)
    records = int(present.size)
    n = np.bincount(record_of, minlength=records)
    c = np.bincount(record_of, weights=correctness.correct[keep] == _TRUE, minlength=records)
    c = c.astype(np.int64)
    unseen = max(0, records_expected - records)
    names: list[str] = []
    columns: list[tuple[FloatArray, BoolArray]] = []  # values (0 where not used), used
    for reducer, k in asked:
        column = _column(reducer, k, n, c, correctness, keep, record_of)
        if column is not None and column[1].any():
            names.append(reducer.value if k is None else reducer.value.replace("k", str(k)))
            columns.append(column)
    if not columns:
        return ()
    values = np.stack([v for v, _ in columns])
    used = np.stack([u for _, u in columns]).astype(np.float64)
    points = values.sum(axis=1) / used.sum(axis=1)
    both = np.concatenate([values, used]).T  # one product per resample chunk, not two

    def means(weights: FloatArray) -> dict[str, FloatArray]:
        product = weights @ both
        sums, counts = product[:, : len(names)], product[:, len(names) :]
        # A resample that drew none of a reducer's records says nothing: its point.
        ratio = np.divide(
            sums, counts, out=np.broadcast_to(points, sums.shape).copy(), where=counts > 0
        )
        return {str(i): ratio[:, i] for i in range(len(names))}

    distribution = bootstrap_distribution(
        np.arange(records, dtype=np.intp), records, means, seed=seed, resamples=resamples
    )
    return tuple(
        ReducedMetric(
            name=name,
            value=float(points[i]),
            interval=percentile_interval(
                distribution[str(i)], float(points[i]), seed=seed, resamples=resamples
            ),
            records=int(columns[i][1].sum()),
            skipped=records - int(columns[i][1].sum()) + unseen,
        )
        for i, name in enumerate(names)
    )


def _column(
    reducer: Reducer,
    k: int | None,
    n: IntArray,
    c: IntArray,
    correctness: SampleCorrectness,
    keep: BoolArray,
    record_of: IntArray,
) -> tuple[FloatArray, BoolArray] | None:
    """Each record's value under ``reducer`` (0 where it does not apply) and whether it
    applies; None for a reducer asked wrongly (no k for pass@k, a k for mean)."""
    if reducer in (Reducer.PASS_AT_K, Reducer.PASS_HAT_K):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            return None
        used = n >= k
        estimate = pass_at_k if reducer is Reducer.PASS_AT_K else pass_hat_k
        values = np.zeros(n.size, dtype=np.float64)
        pairs = np.stack([n[used], c[used]], axis=1)
        distinct, back = np.unique(pairs, axis=0, return_inverse=True)
        table = np.array([estimate(int(a), int(b), k) for a, b in distinct], dtype=np.float64)
        values[used] = table[back.reshape(-1)] if distinct.size else 0.0
        return values, used
    if k is not None:
        return None
    if reducer is Reducer.MEAN:
        return c / np.maximum(n, 1), n > 0
    return _majority(correctness, keep, record_of, n.size)


def _majority(
    correctness: SampleCorrectness, keep: BoolArray, record_of: IntArray, records: int
) -> tuple[FloatArray, BoolArray]:
    """Whether each record's most frequent answer (ties: the first given) is correct;
    a record with a sample without an answer key is left out."""
    values = np.zeros(records, dtype=np.float64)
    used = np.zeros(records, dtype=np.bool_)
    if correctness.answers is None:
        return values, used
    order = np.argsort(record_of, kind="stable")  # each record's samples in their order
    answers = correctness.answers[keep][order].tolist()
    correct = (correctness.correct[keep][order] == _TRUE).tolist()
    bounds = np.concatenate([[0], np.cumsum(np.bincount(record_of, minlength=records))]).tolist()
    for record in range(records):
        start, end = bounds[record], bounds[record + 1]
        keys = answers[start:end]
        if keys and min(keys) >= 0:
            values[record] = majority_correct(keys, correct[start:end])
            used[record] = True
    return values, used
