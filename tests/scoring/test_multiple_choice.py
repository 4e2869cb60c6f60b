"""Multiple choice: every extraction rule and its order, log-probability reading, and the
scorer against scikit-learn accuracy and a plain re-implementation of per-subject macro."""

import random
from collections import Counter, defaultdict

import pytest
from sklearn.metrics import accuracy_score

from evald_server.domain import TaskType
from evald_server.scoring import MultipleChoicePayload, ScoringSample, score_task
from evald_server.scoring._choices import RULES, extract_choice, letter_logprobs
from tests.scoring._factories import make_sample

TOL = 1e-9
FOUR = ["Paris", "Lyon", "Marseille", "Nice"]


@pytest.mark.parametrize(
    ("output", "index", "rule"),
    [
        # 1. a choice's text, verbatim
        ("Lyon", 1, "exact_text"),
        (" Nice\n", 3, "exact_text"),
        # 2. a bare letter, either case
        ("B", 1, "bare_letter"),
        ("  c \n", 2, "bare_letter"),
        # 3. a letter in parentheses at the start
        ("(B)", 1, "parenthesised_letter"),
        ("(d) Nice", 3, "parenthesised_letter"),
        ("(B).", 1, "parenthesised_letter"),
        # 4. a capital letter and "." or ":" at the start
        ("B.", 1, "letter_dot"),
        ("B. Not wrong", 1, "letter_dot"),
        ("B. The", 1, "letter_dot"),  # cut by max_tokens
        ("C: Marseille", 2, "letter_dot"),
        # 5. a letter and ")" at the start
        ("B)", 1, "letter_paren"),
        ("a) Paris", 0, "letter_paren"),
        # 6. "answer:" and a capital letter, anywhere
        ("Answer: B", 1, "answer_colon"),
        ("My final answer: (C)", 2, "answer_colon"),
        ("answer: **D**", 3, "answer_colon"),
        # 7. "answer is" and a capital letter, anywhere
        ("The answer is (B)", 1, "answer_is"),
        ("I think the correct answer is C because it is big.", 2, "answer_is"),
        ("The answer is: A", 0, "answer_is"),
        # 8. a capital letter in bold, anywhere
        ("**B**", 1, "bold_letter"),
        ("It must be **(C)** here", 2, "bold_letter"),
        ("So: **D.**", 3, "bold_letter"),
        # 9. exactly one choice's text, ignoring case, punctuation and spacing
        ("paris.", 0, "choice_text"),
        ("  MARSEILLE ", 2, "choice_text"),
        # 10. exactly one choice's text contained as whole words
        ("It is Lyon, of course", 1, "choice_text_contained"),
        ("the city of nice", 3, "choice_text_contained"),
    ],
)
def test_each_rule_maps_its_form(output: str, index: int, rule: str) -> None:
    found = extract_choice(output, FOUR)
    assert (found.index, found.rule) == (index, rule)


def test_every_rule_is_exercised_by_the_table_above() -> None:
    params = test_each_rule_maps_its_form.pytestmark[0].args[1]  # type: ignore[attr-defined]
    assert {rule for _, _, rule in params} == set(RULES)


@pytest.mark.parametrize(
    ("output", "index", "rule"),
    [
        # Earlier rules win: a leading letter over a later "answer is".
        ("B. The answer is (C)", 1, "letter_dot"),
        # "Answer:" before "answer is" and before bold.
        ("Answer: A. Some say the answer is **B**", 0, "answer_colon"),
        # A letter is preferred to a choice text that also occurs.
        ("The answer is D, not Paris", 3, "answer_is"),
        # A letter beyond the choices does not map; the next rules are tried.
        ("E. Paris", 0, "choice_text_contained"),
        # The first "answer is" in the text counts.
        ("the answer is B; no wait, the answer is C", 1, "answer_is"),
    ],
)
def test_rules_apply_in_the_documented_order(output: str, index: int, rule: str) -> None:
    found = extract_choice(output, FOUR)
    assert (found.index, found.rule) == (index, rule)


@pytest.mark.parametrize(
    "output",
    [
        "",
        "I do not know",
        "Answer: Because the city is big",  # the letter runs on into a word
        "Paris or Lyon",  # two choices
        "E",  # beyond four choices
        "Answer: e",  # lower-case after "answer:" is a word, not a letter
        "A city in France",  # "A" starts a sentence: not "A." nor "A)"
    ],
)
def test_answers_no_rule_maps_are_unmapped(output: str) -> None:
    found = extract_choice(output, FOUR)
    assert (found.index, found.rule) == (None, "unmapped")


def test_logprob_letters_are_normalised_and_combined() -> None:
    top = [(" B", -0.5), ("B", -1.5), ("(C", -2.0), ("a", -0.1), (" Paris", -0.2), ("E", -0.3)]
    found = letter_logprobs(top, 4)
    assert set(found) == {1, 2}  # "a" is lower case (an article), "E" beyond the choices
    assert found[1] == pytest.approx(
        -0.5 + __import__("math").log(1 + __import__("math").exp(-1.0))
    )
    assert found[2] == pytest.approx(-2.0)


def _mc(question: str, gold: int, n: int = 4, subject: str | None = None) -> dict[str, object]:
    record: dict[str, object] = {
        "question": question,
        "choices": [f"choice {question} {i}" for i in range(n)],
        "answer_index": gold,
    }
    if subject is not None:
        record["metadata"] = {"subject": subject}
    return record


def test_logprob_scoring_picks_the_most_likely_letter_and_counts_fallbacks() -> None:
    samples = [
        ScoringSample("s0", "r0", 0, _mc("q0", 1), "A", top_logprobs=((" A", -2.0), (" B", -0.1))),
        ScoringSample("s1", "r1", 0, _mc("q1", 2), "C", top_logprobs=(("Hello", -0.1),)),
        ScoringSample("s2", "r2", 0, _mc("q2", 0), "A", top_logprobs=()),
        ScoringSample("s3", "r3", 0, _mc("q3", 3), "D"),  # text scoring
    ]
    report = score_task(TaskType.MULTIPLE_CHOICE, samples, resamples=20)
    payload = report.payload
    assert isinstance(payload, MultipleChoicePayload)
    assert (payload.logprob_scored, payload.logprob_fallbacks) == (1, 2)
    by_id = {s.subtask_id: s for s in report.sample_scores}
    assert by_id["s0"].scores["predicted_index"] == 1.0  # B by logprob, though the text says A
    assert by_id["s0"].scores["logprob_A"] == -2.0
    assert by_id["s0"].scores["logprob_B"] == -0.1
    assert by_id["s1"].flags == ("logprob_fallback",)
    assert by_id["s1"].correct is True  # C from the text
    assert "logprob_fallback" in by_id["s2"].flags
    assert by_id["s3"].flags == ()
    assert report.metrics["accuracy"] == 1.0
    assert {r.rule: r.samples for r in payload.extraction_rules} == {
        "logprobs": 1,
        "bare_letter": 3,
    }


_FORMS = [
    "{L}",
    "({L})",
    "{L}. {text}",
    "{L}) {text}",
    "Answer: {L}",
    "The answer is ({L})",
    "**{L}**",
    "{text}",
    "I believe it is {text}.",
]


def _random_task(seed: int) -> tuple[list[ScoringSample], list[int], list[int], list[str]]:
    """Samples whose outputs the rules map to a known choice (or to none), and what
    they map to, built without the extraction code."""
    rng = random.Random(seed)
    subjects = rng.sample(["algebra", "anatomy", "law", "virology", "physics"], rng.randint(1, 4))
    samples, gold, predicted, subject_of = [], [], [], []
    for i in range(rng.randint(5, 80)):
        n = rng.randint(2, 6)
        record = _mc(f"q{i}", rng.randrange(n), n, rng.choice(subjects))
        choices = record["choices"]
        assert isinstance(choices, list)
        if rng.random() < 0.15:
            output, intended = rng.choice(["no idea", "", "maybe"]), -1
        else:
            intended = rng.randrange(n)
            form = rng.choice(_FORMS)
            output = form.format(L="ABCDEF"[intended], text=choices[intended])
        samples.append(make_sample(record, output, index=i))
        gold.append(int(record["answer_index"]))  # type: ignore[call-overload]
        predicted.append(intended)
        subject_of.append(str(record["metadata"]["subject"]))  # type: ignore[index]
    return samples, gold, predicted, subject_of


@pytest.mark.parametrize("seed", range(40))
def test_scorer_matches_sklearn_accuracy_and_a_plain_subject_macro(seed: int) -> None:
    samples, gold, predicted, subjects = _random_task(seed)
    report = score_task(TaskType.MULTIPLE_CHOICE, samples, seed=seed, resamples=100)
    payload = report.payload
    assert isinstance(payload, MultipleChoicePayload)

    assert report.metrics["accuracy"] == pytest.approx(accuracy_score(gold, predicted), abs=TOL)
    assert report.metrics["unmapped_rate"] == pytest.approx(
        sum(p == -1 for p in predicted) / len(predicted), abs=TOL
    )
    assert payload.unmapped_outputs == sum(p == -1 for p in predicted)

    # Per-subject accuracy and its unweighted mean, the straightforward way.
    right: dict[str, int] = defaultdict(int)
    seen: dict[str, int] = defaultdict(int)
    for g, p, subject in zip(gold, predicted, subjects, strict=True):
        seen[subject] += 1
        right[subject] += g == p
    expected_subjects = {s: right[s] / seen[s] for s in seen}
    assert {s.subject: s.accuracy for s in payload.subjects} == pytest.approx(expected_subjects)
    assert [s.subject for s in payload.subjects] == sorted(seen)
    macro = sum(expected_subjects.values()) / len(expected_subjects)
    assert report.metrics["subject_macro_accuracy"] == pytest.approx(macro, abs=TOL)
    assert payload.subject_macro_accuracy == pytest.approx(macro, abs=TOL)

    # Predicted against gold letters.
    gold_counts, predicted_counts = Counter(gold), Counter(p for p in predicted if p >= 0)
    right_counts = Counter(g for g, p in zip(gold, predicted, strict=True) if g == p)
    for index, stats in enumerate(payload.letters):
        assert stats.letter == "ABCDEF"[index]
        assert (stats.gold, stats.predicted, stats.correct) == (
            gold_counts[index],
            predicted_counts[index],
            right_counts[index],
        )
    assert len(payload.letters) == max(len(s.record["choices"]) for s in samples)

    for metric in ("accuracy", "unmapped_rate", "subject_macro_accuracy"):
        interval = report.uncertainty[metric].bootstrap
        assert interval.lower <= report.metrics[metric] <= interval.upper
    for metric in ("accuracy", "unmapped_rate"):
        analytic = report.uncertainty[metric].analytic
        assert analytic is not None
        assert analytic.lower <= report.metrics[metric] <= analytic.upper
    assert "subject_macro_accuracy" in report.uncertainty
    assert report.uncertainty["subject_macro_accuracy"].analytic is None


def test_without_subjects_there_is_no_subject_metric() -> None:
    samples = [make_sample(_mc("q", 0), "A", index=0), make_sample(_mc("r", 1), "A", index=1)]
    report = score_task(TaskType.MULTIPLE_CHOICE, samples, resamples=20)
    assert isinstance(report.payload, MultipleChoicePayload)
    assert report.payload.subjects == ()
    assert "subject_macro_accuracy" not in report.metrics
    assert report.metrics == {"accuracy": 0.5, "unmapped_rate": 0.0}


def test_worst_examples_say_what_was_read_and_what_was_gold() -> None:
    samples = [
        make_sample(_mc("q0", 0), "Answer: C", index=0),
        make_sample(_mc("q1", 1), "no idea", index=1),
        make_sample(_mc("q2", 2), "C", index=2),
        make_sample(_mc("q3", 3), None, index=3),  # failed: skipped
    ]
    report = score_task(TaskType.MULTIPLE_CHOICE, samples, worst_k=5, resamples=20)
    assert report.skipped_samples == 1
    assert isinstance(report.payload, MultipleChoicePayload)
    worst = report.payload.worst_examples
    assert [w.record_id for w in worst] == ["r0", "r1"]
    assert worst[0].note == "predicted C (answer_colon), gold A"
    assert worst[0].expected == "A. choice q0 0"
    assert worst[1].note == "no choice found in the answer, gold B"
    flags = {s.subtask_id: s.flags for s in report.sample_scores}
    assert flags["s1-0"] == ("unmapped_output",)
