"""The reducers of a run spec over one task's samples: its ``SampleCorrectness``
grouped by record, then each reducer (``_reducers``) over the records."""

import dataclasses
from collections.abc import Sequence

import numpy as np

from evald_server.scoring._correctness import SampleCorrectness
from evald_server.scoring._reducers import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    RecordSamples,
    ReducedMetric,
    Reducer,
    reduce_records,
)

_NONE, _TRUE = -1, 1


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

    ``records_expected`` is the dataset's record count: a record none of whose samples
    succeeded is counted in ``skipped`` too. A reducer no record qualifies for (every
    record has fewer than k scored samples) is left out of the answer."""
    records = record_samples(correctness)
    unseen = max(0, records_expected - len(records))
    reduced = []
    for reducer, k in asked:
        usable = records
        if reducer is Reducer.MAJORITY:  # a record with a sample without an answer key
            usable = [r for r in records if r.answers is not None]
        try:
            metric = reduce_records(usable, reducer, k, seed=seed, resamples=resamples)
        except ValueError:
            continue
        skipped = metric.skipped + unseen + len(records) - len(usable)
        reduced.append(dataclasses.replace(metric, skipped=skipped))
    return tuple(reduced)
