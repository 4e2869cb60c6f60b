"""Text normalisers shared by the scorers. None of them raises, whatever the input.

* ``collapse_whitespace``: strip, and runs of whitespace become one space.
* ``label_key``: casefold, every character that is neither a word character nor
  whitespace (punctuation, symbols) and ``_`` becomes a space, then
  ``collapse_whitespace``. "  Positive!! " and "positive" share the key "positive".
* ``generation_key``: casefold + ``collapse_whitespace`` (punctuation is kept: "exact"
  generation match is exact up to case and spacing).
* ``squad_normalize``, ``squad_exact_match``, ``squad_f1``: the official SQuAD v1.1
  ``evaluate-v1.1.py`` functions, unchanged in behaviour: lowercase (``str.lower``),
  drop ASCII punctuation (``string.punctuation``), drop the articles a/an/the as whole
  words, collapse whitespace; F1 over the multiset of tokens. As in v1.1, two answers
  that both normalise to nothing have EM 1 but F1 0.
"""

import re
import string
from collections import Counter
from collections.abc import Iterable

_NOT_WORD = re.compile(r"[^\w\s]|_")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


def label_key(text: str) -> str:
    return collapse_whitespace(_NOT_WORD.sub(" ", text.casefold()))


def generation_key(text: str) -> str:
    return collapse_whitespace(text.casefold())


def squad_normalize(text: str) -> str:
    text = text.lower().translate(_DELETE_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def squad_exact_match(prediction: str, ground_truth: str) -> float:
    return float(squad_normalize(prediction) == squad_normalize(ground_truth))


def _token_f1(prediction: Counter[str], prediction_length: int, truth_tokens: list[str]) -> float:
    num_same = sum((prediction & Counter(truth_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = num_same / prediction_length
    recall = num_same / len(truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def squad_f1(prediction: str, ground_truth: str) -> float:
    prediction_tokens = squad_normalize(prediction).split()
    truth_tokens = squad_normalize(ground_truth).split()
    return _token_f1(Counter(prediction_tokens), len(prediction_tokens), truth_tokens)


def squad_best(prediction: str, answers: Iterable[str]) -> tuple[float, float]:
    """(EM, F1), each the maximum over ``answers``; the prediction is normalised once."""
    normalized = squad_normalize(prediction)
    tokens = normalized.split()
    counts = Counter(tokens)
    em = f1 = 0.0
    for answer in answers:
        truth = squad_normalize(answer)
        em = max(em, float(truth == normalized))
        f1 = max(f1, _token_f1(counts, len(tokens), truth.split()))
    return em, f1
