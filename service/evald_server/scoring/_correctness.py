"""Per-sample correctness: the interface the reducers over repeats read.

A task type takes part in the reducers (pass@k, pass^k, majority, mean) by giving each
scored sample a correct bool (``Row.correct`` for a ``BaseScorer``, ``SampleScore.correct``
for any scorer) and, for majority vote, an answer key (``Row.answer``: the answer
normalised the way the scorer compares it, so that "Paris" and "paris." vote together
where the scorer counts them as the same answer). The scorer's report carries them as
``SampleCorrectness``: columns in the order of the report's scored samples, with each
sample's record as a unit index, cheap to pickle back from a scoring worker (a few
bytes a sample) and never stored.

A scorer that is not a ``BaseScorer`` builds one with
``SampleCorrectness.of(record_ids, correct, answers)``.

Which task types give what is ``CORRECTNESS`` (keep it equal to the scorers: a test
does): summarization gives no per-sample correctness (ROUGE is a degree), NER's is
"exactly the gold entity set" with no answer key to vote on; code's is "the program
passed its tests", with no answer key (two programs that differ in text may both pass).
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evald_server.domain import TaskType

_NONE, _FALSE, _TRUE = -1, 0, 1
IntArray = np.ndarray[Any, np.dtype[np.intp]]  # as _intervals has it (which imports _types)


@dataclass(frozen=True, slots=True)
class Correctness:
    """What a task type's scorer gives per sample: a correct bool, an answer key."""

    correct: bool
    answers: bool


CORRECTNESS: dict[TaskType, Correctness] = {
    TaskType.CLASSIFICATION: Correctness(correct=True, answers=True),  # the predicted label
    TaskType.QA: Correctness(correct=True, answers=True),  # SQuAD-normalised answer
    TaskType.MULTIPLE_CHOICE: Correctness(correct=True, answers=True),  # the chosen letter
    TaskType.GENERATION: Correctness(correct=True, answers=True),  # the compared form
    TaskType.NER: Correctness(correct=True, answers=False),  # exact entity set
    TaskType.SUMMARIZATION: Correctness(correct=False, answers=False),
    TaskType.CODE: Correctness(correct=True, answers=False),  # its program passed its tests
    TaskType.TOOL_CALL: Correctness(correct=True, answers=False),  # the calls match exactly
    # Valid against the schema, and equal to the reference where the record has one.
    TaskType.STRUCTURED_OUTPUT: Correctness(correct=True, answers=False),
}


def correctness_of(task_type: str) -> Correctness:
    """What ``task_type`` gives per sample; a task type missing from ``CORRECTNESS``
    (one added since) gives nothing until it is entered there."""
    try:
        return CORRECTNESS[TaskType(task_type)]
    except (KeyError, ValueError):
        return Correctness(correct=False, answers=False)


@dataclass(frozen=True, slots=True, eq=False)
class SampleCorrectness:
    """Each scored sample's record (a unit index), correct code (-1: none, 0, 1) and
    answer key (an index into ``answer_keys``, -1: none; ``answers`` None: no sample
    has one)."""

    units: IntArray
    n_units: int
    correct: np.ndarray
    answers: IntArray | None = None
    answer_keys: tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        """Equal columns (reports compare equal when scored alike on any path)."""
        if not isinstance(other, SampleCorrectness):
            return NotImplemented
        if self.answers is None or other.answers is None:
            answers_equal = self.answers is None and other.answers is None
        else:
            answers_equal = self.answer_keys == other.answer_keys and np.array_equal(
                self.answers, other.answers
            )
        return (
            self.n_units == other.n_units
            and np.array_equal(self.units, other.units)
            and np.array_equal(self.correct, other.correct)
            and answers_equal
        )

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def of(
        cls,
        record_ids: Sequence[str],
        correct: Sequence[bool | None],
        answers: Sequence[str | None] | None = None,
    ) -> "SampleCorrectness":
        """From plain per-sample values (one record id per sample)."""
        unit_of: dict[str, int] = {}
        units = np.fromiter(
            (unit_of.setdefault(r, len(unit_of)) for r in record_ids),
            dtype=np.intp,
            count=len(record_ids),
        )
        return cls.from_columns(units, len(unit_of), codes_of(correct), answers)

    @classmethod
    def from_columns(
        cls,
        units: IntArray,
        n_units: int,
        correct: np.ndarray,
        answers: Sequence[str | None] | None,
    ) -> "SampleCorrectness":
        if len(units) != len(correct) or (answers is not None and len(answers) != len(units)):
            raise ValueError("one unit, correct code and answer per sample")
        codes, keys = _encoded(answers)
        return cls(np.asarray(units, dtype=np.intp), n_units, correct, codes, keys)


MAX_VOTE_KEY_CHARS = 64


def vote_key(answer: str | None) -> str | None:
    """An answer key as kept for majority vote: itself up to ``MAX_VOTE_KEY_CHARS``
    characters, a digest beyond (equal answers still vote together; 100,000 long
    answers are not held twice)."""
    if answer is None or len(answer) <= MAX_VOTE_KEY_CHARS:
        return answer
    return "#" + hashlib.blake2b(answer.encode(), digest_size=16).hexdigest()


def codes_of(correct: Sequence[bool | None]) -> np.ndarray:
    """Correct bools as codes: -1 none, 0 false, 1 true."""
    return np.fromiter(
        (_NONE if c is None else _TRUE if c else _FALSE for c in correct),
        dtype=np.int8,
        count=len(correct),
    )


def _encoded(answers: Sequence[str | None] | None) -> tuple[IntArray | None, tuple[str, ...]]:
    if answers is None or all(a is None for a in answers):
        return None, ()
    index: dict[str, int] = {}
    codes = np.fromiter(
        (-1 if a is None else index.setdefault(a, len(index)) for a in answers),
        dtype=np.intp,
        count=len(answers),
    )
    return codes, tuple(index)
