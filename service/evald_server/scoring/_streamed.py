"""A whole task scored in a worker page by page as its samples arrive (``streams``
scorers: each sample's scores depend on that sample only).

The worker keeps, of each sample, what the report is computed from: its per-sample
scores (``SampleScores``), its primary score, resampling unit and repeat, and the
scorer's metric columns (``measure``); the samples themselves (records, outputs) are
dropped with their page, and of the worst examples only the k worst so far are kept.
The report is the one ``BaseScorer.score`` gives for the same samples, number for
number: the same rows, the same columns concatenated in sample order, the same units
(a record's unit is the order of its first sample) and the same ties (sample order).
"""

from __future__ import annotations  # array[...] is subscriptable at run time from 3.12

import itertools
from array import array
from collections.abc import Sequence

import numpy as np

from evald_server.scoring._common import (
    BaseScorer,
    _check_resamples,
    columns_of,
    repeat_stats,
)
from evald_server.scoring._sample_scores import SampleScores
from evald_server.scoring._scored_pages import WorstCandidate
from evald_server.scoring._types import ScoreReport, ScoringSample


class StreamedTask:
    """Feed it a task's samples in pages (``add``, in order), then take ``report``."""

    def __init__(self, scorer: BaseScorer, *, seed: int, worst_k: int, resamples: int) -> None:
        _check_resamples(resamples)
        self._scorer = scorer
        self._seed = seed
        self._worst_k = worst_k
        self._resamples = resamples
        self._state = scorer.measure_state()
        _, empty = scorer.measure([], [], self._state)  # every column's shape, with no sample
        self._columns: dict[str, list[np.ndarray]] = {k: [v] for k, v in empty.items()}
        self._scores: list[SampleScores] = []
        self._unit_of: dict[str, int] = {}  # record id → its unit (first-seen order)
        self._units = array("q")
        self._repeats = array("q")
        self._primary = array("d")
        self._worst: list[WorstCandidate] = []
        self._skipped = 0

    def add(self, samples: Sequence[ScoringSample]) -> None:
        """Score a page; a page the scorer raises on leaves the task as it was."""
        scored = [s for s in samples if s.output is not None]
        rows, columns = self._scorer.measure(scored, samples, self._state)
        start = len(self._primary)
        primary = np.fromiter((row.primary for row in rows), dtype=np.float64, count=len(rows))
        positions = np.arange(start, start + len(rows), dtype=np.int64)
        # Ties broken by position in the task: the whole task's stable sort.
        candidates = self._scorer._worst_candidates(scored, rows, primary, positions, self._worst_k)
        scores = self._scorer._sample_scores(scored, rows)
        # Everything the scorer computes is in: from here on nothing raises.
        self._skipped += len(samples) - len(scored)
        for name, column in columns.items():
            self._columns[name].append(column)
        self._worst = sorted([*self._worst, *candidates], key=lambda c: (c.primary, c.row_id))[
            : max(self._worst_k, 0)
        ]
        self._scores.append(scores)
        self._primary.extend(primary.tolist())
        unit_of = self._unit_of
        self._units.extend(unit_of.setdefault(s.record_id, len(unit_of)) for s in scored)
        self._repeats.extend(s.repeat_index for s in scored)

    def report(self) -> ScoreReport:
        columns = {name: np.concatenate(parts) for name, parts in self._columns.items()}
        self._columns.clear()
        evaluation = self._scorer.conclude(columns)
        units = np.frombuffer(self._units, dtype=np.int64).astype(np.intp)
        n_units = len(self._unit_of)
        primary = np.frombuffer(self._primary, dtype=np.float64)
        scores = SampleScores(itertools.chain.from_iterable(self._scores))
        self._scores.clear()
        return self._scorer._report(
            evaluation,
            units,
            n_units,
            seed=self._seed,
            resamples=self._resamples,
            worst=tuple(c.example for c in self._worst),
            sample_scores=scores,
            scored=len(primary),
            skipped=self._skipped,
            repeat=repeat_stats(self._repeats, self._primary, units, n_units),
            correctness=self._scorer.correctness(units, n_units, [columns_of(scores)]),
        )
