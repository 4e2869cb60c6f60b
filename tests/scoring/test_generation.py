"""Generation: every match mode, on hand-written cases and 200 generated tasks whose
answers are known by construction."""

import random

import pytest

from evald_server.domain import TaskType
from evald_server.scoring import GenerationPayload, score_task
from tests.scoring._factories import samples_of


def _one(reference: str, output: str, match: str) -> tuple[bool | None, tuple[str, ...]]:
    record = {"input": "q", "reference": reference, "match": match}
    row = score_task(TaskType.GENERATION, samples_of([(record, output)]), resamples=10)
    return row.sample_scores[0].correct, row.sample_scores[0].flags


@pytest.mark.parametrize(
    ("match", "reference", "output", "correct"),
    [
        ("exact", "Paris", "  paris ", True),
        ("exact", "New  York", "new york", True),
        ("exact", "Paris", "Paris.", False),  # punctuation counts
        ("exact", "Paris", "It is Paris", False),
        ("contains", "Paris", "It is PARIS, surely.", True),
        ("contains", "New York", "in new\nyork city", True),  # whitespace collapsed
        ("contains", "Paris", "Pari", False),
        ("regex", r"\b4[0-9]\b", "the answer is 42", True),
        ("regex", r"^42$", "the answer is 42", False),  # search, no flags, raw output
        ("regex", r"(?i)yes", "YES", True),
        ("numeric", "#### 42", "so the answer is 42.", True),
        ("numeric", "#### 1,234", "Total: 1234", True),
        ("numeric", "1234", "Total: $1,234.00", True),
        ("numeric", "#### 42", "42 apples and 43 pears", False),  # the last number counts
        ("numeric", "#### -3", "it drops to -3", True),
        ("numeric", "0.5", "half, i.e. .5", True),
        ("numeric", "#### 7", "seven", False),
        ("numeric", "The answer is 12 #### 12", "12", True),
    ],
)
def test_match_modes(match: str, reference: str, output: str, correct: bool) -> None:
    assert _one(reference, output, match)[0] is correct


def test_flags() -> None:
    assert _one("([", "x", "regex") == (False, ("invalid_regex",))
    assert _one("#### 7", "seven", "numeric") == (False, ("no_number",))
    assert _one("no digits", "7", "numeric") == (False, ("invalid_reference",))


def _case(rng: random.Random) -> tuple[dict[str, str], str, bool]:
    match = rng.choice(["exact", "contains", "regex", "numeric"])
    word = rng.choice(["Paris", "blue whale", "Ada Lovelace", "x=1"])
    right = rng.random() < 0.5
    if match == "exact":
        output = f" {word.upper()} " if right else f"{word}!"
        return {"reference": word, "match": match}, output, right
    if match == "contains":
        output = f"I think {word.lower()} is it" if right else "no idea"
        return {"reference": word, "match": match}, output, right
    if match == "regex":
        n = rng.randint(10, 99)
        output = f"value {n} units" if right else "value ?? units"
        return {"reference": r"value \d+ units", "match": match}, output, right
    n = rng.randint(-5000, 5000)
    reference = rng.choice([f"#### {n:,}", f"steps...\n#### {n}", str(n)])
    shown = n if right else n + rng.choice([-1, 1])
    output = rng.choice([f"The answer is {shown:,}.", f"{shown}", f"1, 2, then {shown}"])
    return {"reference": reference, "match": match}, output, right


@pytest.mark.parametrize("seed", range(200))
def test_generated_tasks(seed: int) -> None:
    rng = random.Random(seed)
    cases = [_case(rng) for _ in range(rng.randint(1, 25))]
    pairs = [({"input": "q", **record}, output) for record, output, _ in cases]
    report = score_task(TaskType.GENERATION, samples_of(pairs), resamples=10)
    truth = [right for _, _, right in cases]
    assert [s.correct for s in report.sample_scores] == truth
    assert report.metrics["accuracy"] == pytest.approx(sum(truth) / len(truth), abs=1e-12)
    payload = report.payload
    assert isinstance(payload, GenerationPayload)
    for stats in payload.per_mode:
        in_mode = [right for record, _, right in cases if record["match"] == stats.match_mode]
        assert (stats.samples, stats.correct) == (len(in_mode), sum(in_mode))
    assert sum(s.samples for s in payload.per_mode) == len(cases)


def test_default_mode_is_exact() -> None:
    report = score_task(
        TaskType.GENERATION, samples_of([({"input": "q", "reference": "Yes"}, "yes")]), resamples=10
    )
    assert report.metrics["accuracy"] == 1.0
    assert isinstance(report.payload, GenerationPayload)
    assert [s.match_mode for s in report.payload.per_mode] == ["exact"]
