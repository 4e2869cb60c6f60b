"""Per-sample scores in columns: what a scoring worker sends back for a whole task.

100,000 ``SampleScore`` objects (each with its own dict) are ~40 MB once unpickled in
the server; the same scores as flat arrays are ~2 MB, and the server turns them into
rows one at a time while it stores them. Flags are columns too (an index into the
task's distinct flag sets per sample): a task whose every output is flagged (none maps
to a label) held a dict entry and a tuple per sample, ~15 MB at 100,000.

``SampleScores`` is a read-only ``Sequence[SampleScore]`` that builds each
``SampleScore`` when it is read, equal to the list of the same scores. Exact: every
score is a float kept as a C double, and each sample keeps its own score names in their
order.
"""

from __future__ import annotations  # array[...] is subscriptable at run time from 3.12

from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

import numpy as np

from evald_server.scoring._types import SampleScore

_NONE, _FALSE, _TRUE = -1, 0, 1  # ``correct`` as a signed byte


def _int_ids(ids: list[str]) -> array[int] | None:
    """The ids as 64-bit integers when each is one written canonically (row ids)."""
    try:
        numbers = array("q", (int(i) for i in ids))
    except (ValueError, OverflowError):
        return None
    return numbers if all(str(n) == i for n, i in zip(numbers, ids, strict=True)) else None


class SampleScores(Sequence[SampleScore]):
    __slots__ = (
        "_answer_keys",
        "_answers_of",
        "_columns",
        "_correct",
        "_flag_sets",
        "_flags_of",
        "_ids",
        "_layout_of",
        "_layouts",
    )

    def __init__(self, items: Iterable[SampleScore] = ()) -> None:
        ids: list[str] = []
        layouts: dict[tuple[str, ...], int] = {}
        layout_of = array("I")
        columns: dict[str, array[float]] = {}
        correct = array("b")
        flag_sets: dict[tuple[str, ...], int] = {(): 0}
        flags_of: array[int] | None = None  # None while no sample has a flag
        answer_keys: dict[str | None, int] = {None: 0}
        answers_of: array[int] | None = None  # None while no sample has an answer key
        for index, item in enumerate(items):
            ids.append(item.subtask_id)
            names = tuple(item.scores)
            layout_of.append(layouts.setdefault(names, len(layouts)))
            for name in names:
                column = columns.get(name)
                if column is None:
                    # A name first seen here gets a column padded for the samples before
                    # (built here only: as setdefault's argument, the padding was built
                    # for every sample, which made a task's columns quadratic in time).
                    column = columns[name] = array("d", bytes(8 * index))
                column.append(float(item.scores[name]))
            for column in columns.values():
                if len(column) == index:  # not a score of this sample: padding
                    column.append(0.0)
            correct.append(_NONE if item.correct is None else int(item.correct))
            if item.flags and flags_of is None:
                flags_of = array("I", bytes(4 * index))  # the samples before: no flag
            if flags_of is not None:
                flags_of.append(flag_sets.setdefault(tuple(item.flags), len(flag_sets)))
            if item.answer is not None and answers_of is None:
                answers_of = array("I", bytes(4 * index))  # the samples before: none
            if answers_of is not None:
                answers_of.append(answer_keys.setdefault(item.answer, len(answer_keys)))
        self._ids: array[int] | tuple[str, ...] = _int_ids(ids) or tuple(ids)
        self._layouts = tuple(layouts)
        self._layout_of = layout_of
        self._columns = columns
        self._correct = correct
        self._flag_sets = tuple(flag_sets)
        self._flags_of = flags_of
        self._answer_keys: tuple[str | None, ...] = tuple(answer_keys)
        self._answers_of = answers_of

    def __len__(self) -> int:
        return len(self._correct)

    def _item(self, index: int) -> SampleScore:
        columns = self._columns
        code = self._correct[index]
        return SampleScore(
            str(self._ids[index]),
            {name: columns[name][index] for name in self._layouts[self._layout_of[index]]},
            () if self._flags_of is None else self._flag_sets[self._flags_of[index]],
            None if code == _NONE else code == _TRUE,
            None if self._answers_of is None else self._answer_keys[self._answers_of[index]],
        )

    def correct_codes(self) -> np.ndarray:
        """Each sample's ``correct`` as a code: -1 none, 0 false, 1 true (a copy)."""
        return np.frombuffer(self._correct, dtype=np.int8).copy()

    def answers(self) -> list[str | None] | None:
        """Each sample's answer key; None when no sample has one."""
        if self._answers_of is None:
            return None
        keys = self._answer_keys
        return [keys[code] for code in self._answers_of]

    @overload
    def __getitem__(self, index: int) -> SampleScore: ...
    @overload
    def __getitem__(self, index: slice) -> list[SampleScore]: ...
    def __getitem__(self, index: int | slice) -> SampleScore | list[SampleScore]:
        if isinstance(index, slice):
            return [self._item(i) for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError("sample score index out of range")
        return self._item(index % len(self))

    def __iter__(self) -> Iterator[SampleScore]:
        return (self._item(i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SampleScores | list | tuple):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __repr__(self) -> str:
        return f"SampleScores({list(self)!r})"


def columnar(scores: Sequence[SampleScore]) -> SampleScores:
    """``scores`` as ``SampleScores`` (unchanged when they already are)."""
    return scores if isinstance(scores, SampleScores) else SampleScores(scores)
