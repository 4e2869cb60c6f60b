"""Scoring page by page: each page of a task's samples is scored on its own as its
outcomes commit (``score_page``, in a scoring worker), so that once the last answer is
in only the aggregation over every page and the bootstrap remain (``aggregate``).

A page keeps what the aggregation needs of each sample in columns (its row id, record,
repeat, primary score and the scorer's own columns) beside its per-sample scores, plus
its ``worst_k`` worst-example candidates: the task's k worst are among the pages' k
worst. The aggregation orders every sample by row id, the order the whole-task path
reads them from the store, so both paths compute the same report.

A scorer whose per-sample scores depend on the whole task (classification matches
outputs against the task's label set) scores a page with the context known when it is
sent (``context``, e.g. the labels of the pages before plus its own); if the task's
final context differs from one a page was scored with, ``aggregate`` answers None and
the caller scores the whole task instead.
"""

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np

from evald_server.scoring._intervals import FloatArray, IntArray
from evald_server.scoring._payloads import WorstExample
from evald_server.scoring._sample_scores import SampleScores
from evald_server.scoring._types import SampleScore, UnscorableSample


@dataclass(frozen=True, slots=True)
class WorstCandidate:
    primary: float
    row_id: int
    example: WorstExample


@dataclass(frozen=True, slots=True)
class ScoredPage:
    """One page of samples scored on their own (arrays in the page's sample order)."""

    row_ids: IntArray  # the samples' subtask ids, which are row ids (ints)
    record_ids: tuple[str, ...]
    repeat_indexes: IntArray
    primary: FloatArray
    sample_scores: SampleScores
    worst: tuple[WorstCandidate, ...]
    context: tuple[str, ...] = ()  # what the page was scored against (classification: labels)
    columns: Mapping[str, np.ndarray] = field(default_factory=dict)  # the scorer's own
    skipped: int = 0  # samples without an output (counted, not scored)
    unscorable: tuple[UnscorableSample, ...] = ()  # left out: the scorer raised on them
    # Each scored sample's correct code and answer key (``_correctness``), kept apart
    # from ``sample_scores``: the engine drops those once it has stored them.
    correct: np.ndarray | None = None
    answers: tuple[str | None, ...] | None = None

    def __len__(self) -> int:
        return int(self.row_ids.size)


def row_ids_of(subtask_ids: Sequence[str]) -> IntArray:
    """Page scoring needs int-like subtask ids (the store's row ids) to order samples."""
    return np.fromiter((int(i) for i in subtask_ids), dtype=np.int64, count=len(subtask_ids))


def merged_order(pages: Sequence[ScoredPage]) -> IntArray:
    """Indices into the pages' concatenated samples, in row id order."""
    ids = np.concatenate([p.row_ids for p in pages]) if pages else np.empty(0, np.int64)
    return np.argsort(ids, kind="stable")


def worst_of(pages: Sequence[ScoredPage], k: int) -> tuple[WorstExample, ...]:
    """The k worst samples over every page, ties in row id order (as the whole-task path
    orders them: a stable sort of the primary score over samples in row id order)."""
    if k <= 0:
        return ()
    candidates = sorted((c for p in pages for c in p.worst), key=lambda c: (c.primary, c.row_id))
    examples = []
    for candidate in candidates[:k]:
        if candidate.primary >= 1.0:  # a perfect sample is never a "worst" one
            break
        examples.append(candidate.example)
    return tuple(examples)


class ConcatenatedScores(Sequence[SampleScore]):
    """Every page's per-sample scores, one page after the other (the store writes them
    by row id, so their order is only the pages')."""

    __slots__ = ("_parts", "_starts")

    def __init__(self, parts: Sequence[SampleScores]) -> None:
        self._parts = tuple(parts)
        starts, total = [], 0
        for part in self._parts:
            starts.append(total)
            total += len(part)
        self._starts = (*starts, total)

    def __len__(self) -> int:
        return self._starts[-1]

    @overload
    def __getitem__(self, index: int) -> SampleScore: ...
    @overload
    def __getitem__(self, index: slice) -> list[SampleScore]: ...
    def __getitem__(self, index: int | slice) -> SampleScore | list[SampleScore]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError("sample score index out of range")
        index %= len(self)
        part = int(np.searchsorted(self._starts, index, side="right")) - 1
        return self._parts[part][index - self._starts[part]]

    def __iter__(self) -> Iterator[SampleScore]:
        for part in self._parts:
            yield from part
