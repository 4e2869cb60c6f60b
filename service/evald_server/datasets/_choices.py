"""Multiple-choice letters, the gold choice of a record, and when two choices read the
same: plain functions, no schema.

Kept apart from the record schemas (pydantic) so that a scoring worker, which reads
gold choices and compares answers with choice texts but never validates a record, does
not import pydantic.

``choice_key`` is the text an answer and a choice are compared by once no choice's
text matched the answer verbatim. It ignores what never tells two choices apart and
keeps everything that can:

* ignored: case (``casefold``), Unicode compatibility forms (NFKC: full-width digits,
  ligatures), spacing, and punctuation that frames a text (``. , ; : ! ? ' " ( ) [ ]
  { } * _`` and backquotes, other Unicode punctuation alike): "Paris." reads as "paris";
* kept: a number's sign, with the Unicode minus sign and dashes read as "-" ("−2" and
  "-2" read the same, "2" differs), its decimal point or separator ("2.5" is not
  "25"), and symbols and units, each one word ("5 %", "$ 5", "10 °c", "x < 3").

Choices of one record whose keys are equal cannot be told apart by an answer, so an
upload refuses them (``colliding_choices``); so it does a choice whose whole text is the
letter of another choice (``letter_choices``: with choices "B", "A", the answer "B" is
the first choice's text and the second choice's letter).
"""

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

MAX_CHOICES = 26  # lettered A-Z

# Read as a minus sign before a digit (and as a dash elsewhere): the Unicode minus sign,
# hyphen, non-breaking hyphen (NFKC makes it a hyphen), figure dash and en dash.
_MINUS = str.maketrans(dict.fromkeys("\u2212\u2010\u2012\u2013", "-"))
# Punctuation (Unicode category P*) that is a word of its own rather than framing:
# percent and per-mille signs, number sign, ampersand, slash, at sign, primes.
_MEANINGFUL_PUNCTUATION = frozenset("%\u2030\u2031#&/@\u2032\u2033")
_FRAMING_SYMBOLS = frozenset("`")  # a symbol (Sk) that only marks up code
_TOKEN = re.compile(
    # A number: an optional sign (not after a word, so "x-2" is "x" and "2"), digits with
    # decimal points or separators between digits, or a leading point (".5").
    r"(?<![\w.,])[-+]?(?:\d+(?:[.,]\d+)*|\.\d+)"
    r"|[^\W\d_]+\d*|\d+"  # a word (letters, then any digits: "x2"); digits
    r"|[^\s\w]|_"  # any other character, one at a time (kept or dropped below)
)


def choice_letter(index: int) -> str:
    """The letter of the ``index``-th choice (0 → "A")."""
    return chr(ord("A") + index)


def gold_choice_index(fields: Mapping[str, Any]) -> int:
    """The 0-based gold choice of a multiple-choice record (either gold field)."""
    if fields.get("answer_index") is not None:
        return int(fields["answer_index"])
    return ord(str(fields["answer_letter"]).upper()) - ord("A")


def choice_key(text: str) -> str:
    """The words of ``text`` that can tell two choices apart, space-separated (see the
    module docstring); "" when nothing is left."""
    normalized = unicodedata.normalize("NFKC", text).translate(_MINUS).casefold()
    return " ".join(token for token in _TOKEN.findall(normalized) if _kept(token))


def _kept(token: str) -> bool:
    if len(token) > 1 or token.isalnum():
        return True
    if token in _MEANINGFUL_PUNCTUATION:
        return True
    category = unicodedata.category(token)
    return token not in _FRAMING_SYMBOLS and not category.startswith(("P", "Z", "C"))


def colliding_choices(choices: Sequence[str]) -> list[tuple[int, ...]]:
    """Groups (two or more indexes, in order) of choices whose ``choice_key`` is equal:
    an answer could not tell them apart. Choices with an empty key are a group too."""
    by_key: dict[str, list[int]] = {}
    for index, choice in enumerate(choices):
        by_key.setdefault(choice_key(choice), []).append(index)
    return [tuple(group) for group in by_key.values() if len(group) > 1]


def letter_choices(choices: Sequence[str]) -> list[tuple[int, int]]:
    """(choice, the other choice it names) for each choice whose whole text, stripped, is
    one letter (either case) naming another of ``choices``."""
    found = []
    for index, choice in enumerate(choices):
        text = choice.strip()
        if len(text) == 1 and text.isascii() and text.isalpha():  # "ß" upper-cases to "SS"
            named = ord(text.upper()) - ord("A")
            if named != index and named < len(choices):
                found.append((index, named))
    return found
