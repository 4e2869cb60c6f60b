"""Loglikelihood multiple choice, as lm-evaluation-harness scores it.

A sample scored this way stores, in its log-probability field, a first entry
``LOGLIKELIHOOD_MARK`` (the value +1.0, which no provider's log-probability can be:
the provider boundary keeps only finite numbers <= 0) and then, per choice in order,
(continuation, summed log-probability): (" A", -0.41), (" B", -2.3), ... The
continuation is the target delimiter " " and the choice's letter or text.

From them, as lm-eval's ``ConfigurableTask.process_results`` does for
``multiple_choice`` (lm_eval/api/task.py, 0.4.x):

* ``acc``: the argmax of the log-likelihoods;
* ``acc_norm``: the argmax of each log-likelihood divided by its choice's length in
  characters (``len(choice)``, the choice without the delimiter — lm-eval's
  ``completion_len``; for letters every length is 1, so acc_norm equals acc);
* ``acc_bytes``: the same divided by the choice's UTF-8 byte length (lm-eval's
  ``byte_length``), which differs from acc_norm only for non-ASCII choices.

Ties go to the first choice, like ``numpy.argmax``.
"""

from collections.abc import Sequence
from dataclasses import dataclass

LOGLIKELIHOOD_MARK = ("loglikelihood", 1.0)
DELIMITER = " "  # lm-eval's target_delimiter


def continuation_entries(
    continuations: Sequence[str], logprobs: Sequence[float]
) -> tuple[tuple[str, float], ...]:
    """What a loglikelihood sample stores: the mark, then (continuation, sum) per choice."""
    return (LOGLIKELIHOOD_MARK, *zip(continuations, logprobs, strict=True))


def is_loglikelihood(entries: Sequence[tuple[str, float]] | None) -> bool:
    return bool(entries) and tuple(entries[0]) == LOGLIKELIHOOD_MARK  # type: ignore[index]


@dataclass(frozen=True, slots=True)
class LoglikelihoodPick:
    """The choices picked by raw, length- and byte-normalized log-likelihood."""

    loglikelihoods: tuple[float, ...]
    acc: int
    acc_norm: int
    acc_bytes: int


def pick(entries: Sequence[tuple[str, float]], n_choices: int) -> LoglikelihoodPick | None:
    """The picks of a stored loglikelihood sample; None when it does not have one entry
    per choice (the scorer then counts the sample unmapped)."""
    pairs = list(entries[1:])
    if len(pairs) != n_choices or n_choices == 0:
        return None
    lls = tuple(float(value) for _, value in pairs)
    choices = [
        label[len(DELIMITER) :] if label.startswith(DELIMITER) else label for label, _ in pairs
    ]
    chars = [max(len(choice), 1) for choice in choices]
    octets = [max(len(choice.encode("utf-8")), 1) for choice in choices]
    return LoglikelihoodPick(
        lls,
        _argmax(lls),
        _argmax([ll / n for ll, n in zip(lls, chars, strict=True)]),
        _argmax([ll / n for ll, n in zip(lls, octets, strict=True)]),
    )


def _argmax(values: Sequence[float]) -> int:
    best = 0
    for index, value in enumerate(values):
        if value > values[best]:
            best = index
    return best
