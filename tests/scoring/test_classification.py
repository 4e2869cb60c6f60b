"""Classification against scikit-learn, and the label-mapping rules one by one."""

import random

import pytest
from sklearn.metrics import (
    accuracy_score,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
    precision_score,
    recall_score,
)

from evald_server.domain import TaskType
from evald_server.scoring import ClassificationPayload, score_task
from evald_server.scoring import _classification as classification
from evald_server.scoring._labels import LabelMatcher
from tests.scoring._factories import samples_of

TOL = 1e-9
UNMAPPED = "<unmapped>"
WORDS = ["positive", "negative", "neutral", "sports", "world news", "business", "sci-fi"]


def _render(rng: random.Random, intended: str, choices: list[str] | None) -> str:
    """An output that the documented rules map to ``intended``."""
    forms = [
        intended,
        f"  {intended.upper()}  ",
        f"{intended.capitalize()}!",
        f"The answer is {intended}.",
        f"I think it's {intended}, clearly",
    ]
    if choices is not None:
        letter = "ABCDEFG"[choices.index(intended)]
        forms += [
            letter,
            f"({letter})",
            f"{letter.lower()}.",
            f"Answer: {letter}",
            f"{letter}) {intended}",
        ]
    return rng.choice(forms)


def _unmappable(rng: random.Random, labels: list[str], choices: list[str] | None) -> str:
    forms = ["no idea", "", "?!"]
    if choices is not None:  # (without choices, labels[0] might never be gold)
        forms += ["Z", f"{labels[0]} or {labels[1]}"]  # a letter beyond the choices; two labels
    return rng.choice(forms)


def _case(seed: int) -> tuple[list[str], list[str], list[dict[str, object]], list[str]]:
    rng = random.Random(seed)
    labels = rng.sample(WORDS, rng.randint(2, 5))
    with_choices = rng.random() < 0.5
    records, outputs, y_true, y_pred = [], [], [], []
    for _ in range(rng.randint(1, 60)):
        gold = rng.choice(labels)
        choices = labels if with_choices else None
        record: dict[str, object] = {"input": "text", "label": gold}
        if choices is not None:
            record["choices"] = choices
        roll = rng.random()
        if roll < 0.15:
            outputs.append(_unmappable(rng, labels, choices))
            y_pred.append(UNMAPPED)
        else:
            intended = gold if roll < 0.6 else rng.choice(labels)
            outputs.append(_render(rng, intended, choices))
            y_pred.append(intended)
        records.append(record)
        y_true.append(gold)
    if not with_choices:
        # Without choices the candidates are the task's gold labels: a label that is
        # never gold maps to nothing.
        y_pred = [p if p in y_true else UNMAPPED for p in y_pred]
    return y_true, y_pred, records, outputs


# sklearn warns about a 1×1 confusion matrix even when ``labels`` is passed.
@pytest.mark.filterwarnings("ignore:A single label was found:UserWarning")
@pytest.mark.parametrize("seed", range(220))
def test_agrees_with_scikit_learn(seed: int) -> None:
    y_true, y_pred, records, outputs = _case(seed)
    report = score_task(
        TaskType.CLASSIFICATION, samples_of(list(zip(records, outputs, strict=True))), resamples=20
    )
    payload = report.payload
    assert isinstance(payload, ClassificationPayload)
    active = sorted(set(y_true) | (set(y_pred) - {UNMAPPED}))
    assert report.metrics["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred), abs=TOL)
    for name, metric in (
        ("f1_macro", f1_score),
        ("precision_macro", precision_score),
        ("recall_macro", recall_score),
    ):
        expected = metric(y_true, y_pred, labels=active, average="macro", zero_division=0)
        assert report.metrics[name] == pytest.approx(expected, abs=TOL), name
    labels = list(payload.labels)
    precision, recall, f1, support = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, zero_division=0
    )
    for i, per_class in enumerate(payload.per_class):
        assert per_class.label == labels[i]
        assert per_class.precision == pytest.approx(precision[i], abs=TOL)
        assert per_class.recall == pytest.approx(recall[i], abs=TOL)
        assert per_class.f1 == pytest.approx(f1[i], abs=TOL)
        assert per_class.support == support[i]
    assert [list(row) for row in payload.confusion] == confusion_matrix(
        y_true, y_pred, labels=labels
    ).tolist()
    assert payload.unmapped_outputs == y_pred.count(UNMAPPED)
    assert list(payload.unmapped_by_gold) == [
        sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == label and p == UNMAPPED)
        for label in labels
    ]
    flagged = [s.flags == ("unmapped_output",) for s in report.sample_scores]
    assert flagged == [p == UNMAPPED for p in y_pred]
    assert [s.correct for s in report.sample_scores] == [
        t == p for t, p in zip(y_true, y_pred, strict=True)
    ]


CHOICES = ["Paris", "London", "Rome", "Berlin"]


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("London", "London"),  # 1. exact
        ("  london.  ", "London"),  # 2. normalised: case, spacing, punctuation
        ("LONDON!!!", "London"),
        ("B", "London"),  # 3. choice letter alone
        ("(B)", "London"),
        ("[b]", "London"),
        ("B.", "London"),
        ("B)", "London"),
        ("Answer: C", "Rome"),
        ("The correct answer is (D).", "Berlin"),
        ("B) London", "London"),  # letter + the choice's own text
        ("(b) london", "London"),
        ("B) Paris", "Paris"),  # letter and text disagree: the letter is ignored, the text wins
        ("E", None),  # beyond the choices
        ("The capital is Rome.", "Rome"),  # 4. alone in a sentence
        ("Rome, not Paris", None),  # two labels → unmapped
        ("Romeo", None),  # whole words only
        ("", None),
        ("I don't know", None),
    ],
)
def test_label_rules_with_choices(output: str, expected: str | None) -> None:
    assert LabelMatcher(CHOICES, lettered=True).match(output) == expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("The sentiment is positive.", "positive"),
        ("very negative", "negative"),
        ("B", None),  # letters only mean something when the record has choices
        ("sci fi", "sci-fi"),  # punctuation is a word break in keys
        ("positive or negative", None),
        # A negated label is not that label (nor a guess at another one):
        ("not positive", None),
        ("not neg", None),
        ("It is not a very positive review.", None),
        ("This isn't negative", None),
        ("This isn’t negative", None),
        ("Not at all negative", None),
        ("neutral, not negative", None),
        ("No doubt: negative", None),  # within reach of "no": not read (a limit of the rule)
        ("No doubt about it: negative", "negative"),  # four words on: out of reach
        ("Negative. The review is not kind.", "negative"),  # the negation is after it
    ],
)
def test_label_rules_without_choices(output: str, expected: str | None) -> None:
    labels = ["positive", "negative", "neutral", "sci-fi", "neg"]
    assert LabelMatcher(labels, lettered=False).match(output) == expected


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("not toxic", "not toxic"),  # 2. normalised
        ("The comment is not toxic.", "not toxic"),  # the longer mention holds the shorter
        ("toxic", "toxic"),
        ("The comment is toxic.", "toxic"),
        ("It is not not toxic", None),  # a negated label, even a negative one
        ("I live in New York", "new york"),
        ("York, not New York", None),
    ],
)
def test_a_mention_inside_a_longer_label_is_that_label(output: str, expected: str | None) -> None:
    labels = ["toxic", "not toxic", "york", "new york"]
    assert LabelMatcher(labels, lettered=False).match(output) == expected


def test_labels_sharing_a_key_are_reached_only_exactly() -> None:
    matcher = LabelMatcher(["Yes", "yes", "no"], lettered=False)
    assert matcher.match("Yes") == "Yes"
    assert matcher.match("yes") == "yes"
    assert matcher.match("YES") is None
    assert matcher.match("yes.") is None


def test_label_set_includes_choices_never_seen() -> None:
    records = [{"input": "x", "label": "a", "choices": ["a", "b", "c"]}]
    report = score_task(TaskType.CLASSIFICATION, samples_of([(records[0], "a")]), resamples=10)
    assert isinstance(report.payload, ClassificationPayload)
    assert report.payload.labels == ("a", "b", "c")
    # b and c have neither support nor predictions: not in the macro average.
    assert report.metrics["f1_macro"] == 1.0
    assert [c.support for c in report.payload.per_class] == [1, 0, 0]


def test_confusion_is_omitted_above_the_cap() -> None:
    pairs = [({"input": "x", "label": f"label{i}"}, f"label{i}") for i in range(201)]
    report = score_task(TaskType.CLASSIFICATION, samples_of(pairs), resamples=10)
    assert isinstance(report.payload, ClassificationPayload)
    assert report.payload.confusion == ()
    assert report.payload.unmapped_by_gold == ()  # the matrix's extra column goes with it
    assert len(report.payload.per_class) == 201
    assert report.metrics["accuracy"] == 1.0


@pytest.mark.parametrize("seed", range(6))
def test_bootstrap_from_one_count_matrix_equals_the_grouped_sums(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resampled counts come from one matrix product; above its size bound from
    per-count grouped sums. The counts are integers, so both give the same intervals."""
    _, _, records, outputs = _case(seed)
    samples = samples_of(list(zip(records, outputs, strict=True)))
    one_product = score_task(TaskType.CLASSIFICATION, samples, seed=seed, resamples=200)
    monkeypatch.setattr(classification, "MAX_COLUMN_CELLS", 0)
    grouped = score_task(TaskType.CLASSIFICATION, samples, seed=seed, resamples=200)
    assert one_product.uncertainty == grouped.uncertainty
    assert one_product.metrics == grouped.metrics
