"""Map a model's free text to one label of a classification record, or to none.

The candidates are the record's ``choices`` when it has them, otherwise every label of
the dataset (all gold labels and all choices). The rules, tried in order; the first
that yields exactly one label wins:

1. **Exact**: the output, stripped, equals a candidate.
2. **Normalised**: ``label_key(output)`` (case, punctuation and spacing ignored)
   equals the key of exactly one candidate: "Positive." → "positive".
3. **Choice letter** (records with ``choices`` only): the letter of the i-th choice
   (A = first, case-insensitive) alone — "B", "(B)", "[B]", "B.", "B)", "B:" — or after
   "answer"/"option"/"choice", optionally "the", "correct", "is", ":" — "Answer: B",
   "The correct answer is (B)." — or followed by the choice's own text — "B) Paris",
   "(B) paris". A letter beyond the choices maps to nothing.
4. **Alone in a sentence**: exactly one candidate's key occurs in the output's key as
   whole words (``_mentions``: a mention inside a longer one is part of it, "not toxic"
   is the label "not toxic" when there is one): "The sentiment is positive." →
   "positive". Two different candidates occurring ("positive or negative") map to
   nothing, and so does a negated one ("not positive", "isn't negative"): a reader that
   took "not neg" for "neg" would score the opposite answer as right.

An output that no rule maps is *unmapped*: counted wrong, flagged per sample. Candidates
that share a key (only possible across records without choices) are ambiguous under
rules 2 and 4 and are reached by rule 1 only.
"""

import re
from collections.abc import Iterable

from evald_server.scoring._mentions import mentioned
from evald_server.scoring._normalize import label_key

_LETTER_ALONE = re.compile(r"^[(\[]?([A-Za-z])[)\]]?[.:]?$")
_LETTER_AFTER_ANSWER = re.compile(
    r"^(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)\s*(?:is\s*)?:?\s*"
    r"[(\[]?([A-Za-z])[)\]]?\.?$",
    re.IGNORECASE,
)
_LETTER_WITH_TEXT = re.compile(r"^[(\[]?([A-Za-z])(?:[)\]]|[.:)]\s)\s*(.+)$", re.DOTALL)


class LabelMatcher:
    """The label rules for one candidate set (built once per distinct set)."""

    def __init__(self, candidates: Iterable[str], *, lettered: bool) -> None:
        self._candidates = tuple(dict.fromkeys(candidates))  # unique, in order
        self._lettered = lettered
        self._exact = {c.strip(): c for c in self._candidates}
        self._by_key: dict[str, set[str]] = {}
        for candidate in self._candidates:
            key = label_key(candidate)
            if key:
                self._by_key.setdefault(key, set()).add(candidate)
        self._lengths = sorted({key.count(" ") + 1 for key in self._by_key})

    def match(self, output: str) -> str | None:
        stripped = output.strip()
        if stripped in self._exact:
            return self._exact[stripped]
        key = label_key(output)
        same_key = self._by_key.get(key)
        if same_key is not None and len(same_key) == 1:
            return next(iter(same_key))
        if self._lettered:
            lettered = self._match_letter(stripped)
            if lettered is not None:
                return lettered
        return self._match_in_sentence(key)

    def _choice(self, letter: str) -> str | None:
        index = ord(letter.upper()) - ord("A")
        return self._candidates[index] if 0 <= index < len(self._candidates) else None

    def _match_letter(self, stripped: str) -> str | None:
        found = _LETTER_ALONE.match(stripped) or _LETTER_AFTER_ANSWER.match(stripped)
        if found is not None:
            return self._choice(found.group(1))
        with_text = _LETTER_WITH_TEXT.match(stripped)
        if with_text is not None:
            choice = self._choice(with_text.group(1))
            if choice is not None and label_key(with_text.group(2)) == label_key(choice):
                return choice
        return None

    def _match_in_sentence(self, key: str) -> str | None:
        keys = mentioned(key.split(), self._by_key, self._lengths)
        if keys is None:
            return None
        labels = {label for found in keys for label in self._by_key[found]}
        return labels.pop() if len(labels) == 1 else None
