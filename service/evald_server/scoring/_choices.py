"""Map a model's answer to one choice of a multiple-choice record, or to none.

Choices are lettered A, B, ... in order. The rules, tried in this order on the answer
with surrounding whitespace removed; the first that names a choice wins (a letter
beyond the record's choices does not, and the next rule is tried):

1. ``bare_letter`` — the whole answer is one letter, either case: "B", "b".
2. ``parenthesised_letter`` — the answer starts with a letter in parentheses, either
   case: "(B)", "(b) Paris", "(B).".
3. ``letter_dot`` — the answer starts with a capital letter and "." or ":", then a space
   or the end: "B.", "B. Not wrong", "B. The" (cut by max_tokens), "B: Paris".
4. ``letter_paren`` — the answer starts with a letter and ")", then a space or the end:
   "B)", "b) Paris".
5. ``answer_colon`` — "answer" (any case) and ":" followed by a capital letter, maybe in
   parentheses or bold, anywhere (the first one): "Answer: B", "Final answer: (C)".
6. ``answer_is`` — "answer is" (any case), maybe ":", then a capital letter, maybe in
   parentheses or bold, anywhere (the first one): "The answer is (B)", "I think the
   correct answer is C because ...".
7. ``bold_letter`` — a capital letter in Markdown bold, anywhere (the first one):
   "**B**", "**(B)**", "**B.**".
8. ``choice_text`` — the answer equals the text of exactly one choice, ignoring case,
   punctuation and spacing: "paris." → "Paris".
9. ``choice_text_contained`` — the text of exactly one choice occurs in the answer as
   whole words (same normalisation): "It is Paris, of course" → "Paris". Two choices
   occurring ("Paris or Lyon") map to nothing.

A letter in rules 5-7 must not run on into a word: "Answer: Because ..." is no letter.
An answer no rule maps is *unmapped*: wrong, flagged ``unmapped_output``, counted.

With log-probability scoring the first generated token's top log-probabilities are read
before any of this (``letter_logprobs``): a token that is one capital letter after
stripping spaces and "(", ")", "." (" B", "B", "(B") counts for that letter; the
probabilities of a letter's tokens are added (log-sum-exp); the most likely letter
among the record's choices wins. No such token: the rules above, counted as a fallback.
"""

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from evald_server.scoring._normalize import label_key

RULES = (
    "bare_letter",
    "parenthesised_letter",
    "letter_dot",
    "letter_paren",
    "answer_colon",
    "answer_is",
    "bold_letter",
    "choice_text",
    "choice_text_contained",
)
LOGPROBS = "logprobs"
UNMAPPED = "unmapped"

_LETTER = r"\(?\**\(?([A-Z])\)?\**(?![A-Za-z0-9])"
_LETTER_RULES: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    # (rule, pattern, search anywhere rather than match at the start)
    ("bare_letter", re.compile(r"([A-Za-z])\Z"), False),
    ("parenthesised_letter", re.compile(r"\(([A-Za-z])\)(?=[\s.:,;]|\Z)"), False),
    ("letter_dot", re.compile(r"([A-Z])[.:](?=\s|\Z)"), False),
    ("letter_paren", re.compile(r"([A-Za-z])\)(?=\s|\Z)"), False),
    ("answer_colon", re.compile(r"(?i:\banswer)\s*:\s*" + _LETTER), True),
    ("answer_is", re.compile(r"(?i:\banswer\s+is)\s*:?\s*" + _LETTER), True),
    ("bold_letter", re.compile(r"\*\*\s*\(?([A-Z])\)?[.:)]?\s*\*\*"), True),
)
_LOGPROB_TOKEN = re.compile(r"^\(?([A-Z])[.)]?$")


@dataclass(frozen=True, slots=True)
class Extraction:
    """Which choice an answer maps to (``None``: unmapped) and the rule that mapped it."""

    index: int | None
    rule: str


def extract_choice(output: str, choices: Sequence[str]) -> Extraction:
    """The first rule of the module's list that maps ``output`` to one of ``choices``."""
    stripped = output.strip()
    for rule, pattern, anywhere in _LETTER_RULES:
        found = pattern.search(stripped) if anywhere else pattern.match(stripped)
        if found is not None:
            index = ord(found.group(1).upper()) - ord("A")
            if index < len(choices):
                return Extraction(index, rule)
    keys = [label_key(choice) for choice in choices]
    answer = label_key(stripped)
    exact = [i for i, key in enumerate(keys) if key and key == answer]
    if len(exact) == 1:
        return Extraction(exact[0], "choice_text")
    padded = f" {answer} "
    contained = [i for i, key in enumerate(keys) if key and f" {key} " in padded]
    if len(contained) == 1:
        return Extraction(contained[0], "choice_text_contained")
    return Extraction(None, UNMAPPED)


def letter_logprobs(top_logprobs: Sequence[tuple[str, float]], n_choices: int) -> dict[int, float]:
    """Choice index → log-probability of its letter among the first token's top
    alternatives (only the letters that occur there)."""
    mass: dict[int, list[float]] = {}
    for token, logprob in top_logprobs:
        found = _LOGPROB_TOKEN.match(token.strip())
        if found is None or not math.isfinite(logprob):
            continue
        index = ord(found.group(1)) - ord("A")
        if index < n_choices:
            mass.setdefault(index, []).append(logprob)
    return {index: _logsumexp(values) for index, values in sorted(mass.items())}


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))
