"""Map a model's answer to one choice of a multiple-choice record, or to none.

Choices are lettered A, B, ... in order. The rules, tried in this order on the answer
with surrounding whitespace removed; the first that names a choice wins (a letter
beyond the record's choices does not, and the next rule is tried):

1. ``exact_text`` — the answer is the text of exactly one choice, verbatim (both
   stripped): "-2" → "-2", "2" → "2", whatever else the other choices read like.
2. ``bare_letter`` — the whole answer is one letter, either case: "B", "b".
3. ``parenthesised_letter`` — the answer starts with a letter in parentheses, either
   case: "(B)", "(b) Paris", "(B).".
4. ``letter_dot`` — the answer starts with a capital letter and "." or ":", then a space
   or the end: "B.", "B. Not wrong", "B. The" (cut by max_tokens), "B: Paris".
5. ``letter_paren`` — the answer starts with a letter and ")", then a space or the end:
   "B)", "b) Paris".
6. ``answer_colon`` — "answer" (any case) and ":" followed by a capital letter, maybe in
   parentheses or bold, anywhere (the first one): "Answer: B", "Final answer: (C)".
7. ``answer_is`` — "answer is" (any case), maybe ":", then a capital letter, maybe in
   parentheses or bold, anywhere (the first one): "The answer is (B)", "I think the
   correct answer is C because ...".
8. ``bold_letter`` — a capital letter in Markdown bold, anywhere (the first one):
   "**B**", "**(B)**", "**B.**".
9. ``choice_text`` — the answer's ``choice_key`` equals exactly one choice's: case,
   framing punctuation and spacing ignored, signs (the Unicode minus too), decimal
   points, symbols and units kept: "paris." → "Paris", "−2" → "-2", but "2" is not "-2".
10. ``choice_text_contained`` — exactly one choice's key occurs in the answer's key as
   whole words (``_mentions``: a mention inside a longer one is part of it): "It is
   Paris, of course" → "Paris", "x = -2." → "-2". Two choices occurring ("Paris or
   Lyon"), or a negated one ("not Paris"), map to nothing.

A letter in rules 6-8 must not run on into a word: "Answer: Because ..." is no letter.
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

from evald_server.datasets import choice_key
from evald_server.scoring._mentions import mentioned

RULES = (
    "exact_text",
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
    verbatim = [i for i, choice in enumerate(choices) if choice.strip() == stripped]
    if len(verbatim) == 1:
        return Extraction(verbatim[0], "exact_text")
    for rule, pattern, anywhere in _LETTER_RULES:
        found = pattern.search(stripped) if anywhere else pattern.match(stripped)
        if found is not None:
            index = ord(found.group(1).upper()) - ord("A")
            if index < len(choices):
                return Extraction(index, rule)
    keys = [choice_key(choice) for choice in choices]
    answer = choice_key(stripped)
    same = [i for i, key in enumerate(keys) if key and key == answer]
    if len(same) == 1:
        return Extraction(same[0], "choice_text")
    present = {key for key in keys if key}
    lengths = sorted({key.count(" ") + 1 for key in present})
    mentions = mentioned(answer.split(), present, lengths)
    if mentions is not None and len(mentions) == 1:
        (only,) = mentions
        if keys.count(only) == 1:  # choices sharing a key (refused at upload) are no answer
            return Extraction(keys.index(only), "choice_text_contained")
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
