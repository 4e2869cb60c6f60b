"""QA against hand-checked SQuAD cases and the official v1.1 evaluation functions."""

import random
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

import pytest

from evald_server.domain import TaskType
from evald_server.scoring import QaPayload, score_task
from tests.scoring._factories import samples_of

TOL = 1e-9


# The official SQuAD v1.1 evaluation script (evaluate-v1.1.py), its metric functions
# copied verbatim in behaviour: the reference the scorer is held to.
def official_normalize_answer(s: str) -> str:
    def remove_articles(text: str) -> str:
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text: str) -> str:
        return " ".join(text.split())

    def remove_punc(text: str) -> str:
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text: str) -> str:
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def official_f1_score(prediction: str, ground_truth: str) -> float:
    prediction_tokens = official_normalize_answer(prediction).split()
    ground_truth_tokens = official_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def official_exact_match_score(prediction: str, ground_truth: str) -> bool:
    return official_normalize_answer(prediction) == official_normalize_answer(ground_truth)


def official_max_over_ground_truths(
    metric_fn: Callable[[str, str], float], prediction: str, ground_truths: Sequence[str]
) -> float:
    return max(metric_fn(prediction, gt) for gt in ground_truths)


# Hand-checked from the metric's definition: (prediction, answers, EM, F1).
GOLDEN = [
    ("The Eiffel Tower", ["Eiffel Tower"], 1.0, 1.0),  # article dropped
    ("Eiffel", ["the Eiffel Tower"], 0.0, 2 / 3),  # P 1/1, R 1/2
    ("in 1889, Paris", ["1889"], 0.0, 0.5),  # P 1/3, R 1/1
    ("an apple a day", ["apple day"], 1.0, 1.0),
    ("Hello, World!", ["hello world"], 1.0, 1.0),  # case, punctuation
    ("U.S.A.", ["USA"], 1.0, 1.0),  # punctuation is deleted, not spaced
    ("state-of-the-art", ["state of the art"], 0.0, 0.0),  # "stateoftheart" vs "state of art"
    ("cat cat dog", ["cat dog dog"], 0.0, 2 / 3),  # multiset overlap 2: P 2/3, R 2/3
    ("blue", ["red", "blue sky"], 0.0, 2 / 3),  # max over answers
    ("red", ["red", "blue sky"], 1.0, 1.0),
    ("the  answer\tis 42", ["42"], 0.0, 0.5),  # P 1/3, R 1/1
    ("", ["x"], 0.0, 0.0),
    ("The", ["a"], 1.0, 0.0),  # v1.1 quirk: both empty after normalisation
    ("An", ["an apple"], 0.0, 0.0),
    ("Café", ["cafe"], 0.0, 0.0),  # no accent folding in SQuAD
    ("Thea", ["the a"], 0.0, 0.0),  # articles are whole words only
    # Per answer, never their union: vs "Nikola Tesla" P 2/6, R 2/2 → 1/2; vs "1856" 2/7.
    ("Nikola Tesla was born in 1856", ["Nikola Tesla", "1856"], 0.0, 0.5),
]


@pytest.mark.parametrize(("prediction", "answers", "em", "f1"), GOLDEN)
def test_golden_cases(prediction: str, answers: list[str], em: float, f1: float) -> None:
    report = score_task(
        TaskType.QA, samples_of([({"question": "q", "answers": answers}, prediction)]), resamples=10
    )
    assert report.metrics["exact_match"] == pytest.approx(em, abs=TOL)
    assert report.metrics["f1"] == pytest.approx(f1, abs=TOL)
    # The official functions agree with the hand-checked numbers too.
    assert (
        float(official_max_over_ground_truths(official_exact_match_score, prediction, answers))
        == em
    )
    assert official_max_over_ground_truths(official_f1_score, prediction, answers) == pytest.approx(
        f1, abs=TOL
    )


def test_golden_set_as_one_task() -> None:
    pairs = [({"question": "q", "answers": a}, p) for p, a, _, _ in GOLDEN]
    report = score_task(TaskType.QA, samples_of(pairs), resamples=10)
    assert report.metrics["exact_match"] == pytest.approx(
        sum(em for *_, em, _ in GOLDEN) / len(GOLDEN), abs=TOL
    )
    assert report.metrics["f1"] == pytest.approx(
        sum(f1 for *_, f1 in GOLDEN) / len(GOLDEN), abs=TOL
    )
    payload = report.payload
    assert isinstance(payload, QaPayload)
    assert payload.no_answer_outputs == 3  # "", "The", "An"
    assert payload.answered == len(GOLDEN) - 3


VOCAB = ["the", "a", "an", "Paris", "paris,", "France", "1889", "tower", "Tower.", "of", "It's"]
VOCAB += ["(1,000)", "dog", "cat", "ÉCOLE", "école", "state-of-art", "  ", "\t", "!", "An"]


def _phrase(rng: random.Random, low: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(low, 6)))


@pytest.mark.parametrize("seed", range(200))
def test_agrees_with_the_official_script(seed: int) -> None:
    rng = random.Random(seed)
    pairs = []
    for _ in range(rng.randint(1, 20)):
        answers = [_phrase(rng, 1) for _ in range(rng.randint(1, 3))]
        prediction = rng.choice([_phrase(rng, 0), answers[0], answers[-1].upper()])
        pairs.append(({"question": "q", "answers": answers}, prediction))
    report = score_task(TaskType.QA, samples_of(pairs), resamples=10)
    em = [
        float(official_max_over_ground_truths(official_exact_match_score, p, r["answers"]))
        for r, p in pairs
    ]
    f1 = [official_max_over_ground_truths(official_f1_score, p, r["answers"]) for r, p in pairs]
    for row, expected_em, expected_f1 in zip(report.sample_scores, em, f1, strict=True):
        assert row.scores["exact_match"] == expected_em
        assert row.scores["f1"] == pytest.approx(expected_f1, abs=TOL)
        assert row.correct == (expected_em == 1.0)
    assert report.metrics["exact_match"] == pytest.approx(sum(em) / len(em), abs=TOL)
    assert report.metrics["f1"] == pytest.approx(sum(f1) / len(f1), abs=TOL)
