"""NER against seqeval on BIO data, the span form, and the JSON entity parser."""

import json
import random
from collections.abc import Mapping

import pytest
from seqeval.metrics import f1_score, precision_score, recall_score
from seqeval.metrics.sequence_labeling import get_entities, precision_recall_fscore_support

from evald_server.domain import TaskType
from evald_server.scoring import NerPayload, score_task
from evald_server.scoring._entities import parse_entities
from tests.scoring._factories import samples_of

TOL = 1e-9
TYPES = ["PER", "LOC", "ORG", "MISC"]


def _tags(rng: random.Random, n: int) -> list[str]:
    """Random tag sequences, including ones that are not well-formed BIO (I- after O)."""
    tags = []
    for _ in range(n):
        roll = rng.random()
        tags.append("O" if roll < 0.45 else f"{'B' if roll < 0.75 else 'I'}-{rng.choice(TYPES)}")
    return tags


def _entities(tokens: list[str], tags: list[str]) -> list[dict[str, str]]:
    """What a model would answer if it had predicted ``tags`` (via seqeval's chunking)."""
    return [
        {"text": " ".join(tokens[start : end + 1]), "type": kind}
        for kind, start, end in get_entities(tags)
    ]


def _wrap(rng: random.Random, entities: list[dict[str, str]]) -> str:
    body = json.dumps(entities, ensure_ascii=False)
    return rng.choice(
        [
            body,
            f"```json\n{body}\n```",
            f"Here are the entities:\n{body}\nHope this helps!",
            json.dumps({"entities": entities}),
            f"Sure. ```\n{json.dumps({'entities': entities}, indent=2)}\n``` Done.",
        ]
    )


@pytest.mark.parametrize("seed", range(220))
def test_agrees_with_seqeval_on_bio(seed: int) -> None:
    rng = random.Random(seed)
    records, outputs, y_true, y_pred = [], [], [], []
    for sentence in range(rng.randint(1, 12)):
        n = rng.randint(1, 12)
        # Unique tokens: a surface string names one span (see the _ner docstring).
        tokens = [f"w{sentence}x{i}" for i in range(n)]
        gold = _tags(rng, n)
        predicted = gold[:] if rng.random() < 0.3 else _tags(rng, n)
        output = _wrap(rng, _entities(tokens, predicted))
        if rng.random() < 0.1:  # unparseable: an empty prediction
            output, predicted = rng.choice(["no entities here", "[{oops", ""]), ["O"] * n
        records.append({"tokens": tokens, "tags": gold})
        outputs.append(output)
        y_true.append(gold)
        y_pred.append(predicted)
    report = score_task(
        TaskType.NER, samples_of(list(zip(records, outputs, strict=True))), resamples=10
    )
    for name, metric in (
        ("precision", precision_score),
        ("recall", recall_score),
        ("f1", f1_score),
    ):
        expected = metric(y_true, y_pred, zero_division=0)
        assert report.metrics[name] == pytest.approx(expected, abs=TOL), name
    payload = report.payload
    assert isinstance(payload, NerPayload)
    types = sorted({kind for tags in y_true + y_pred for kind, _, _ in get_entities(tags)})
    assert [t.entity_type for t in payload.per_type] == types
    if types:
        precision, recall, f1, support = precision_recall_fscore_support(
            y_true, y_pred, average=None, zero_division=0
        )
        for i, per_type in enumerate(payload.per_type):
            assert per_type.precision == pytest.approx(precision[i], abs=TOL)
            assert per_type.recall == pytest.approx(recall[i], abs=TOL)
            assert per_type.f1 == pytest.approx(f1[i], abs=TOL)
            assert per_type.support == support[i]


def _ner(record: Mapping[str, object], output: str) -> tuple[dict[str, float], tuple[str, ...]]:
    report = score_task(TaskType.NER, samples_of([(record, output)]), resamples=10)
    return report.sample_scores[0].scores, report.sample_scores[0].flags


SPAN_RECORD = {
    "text": "Ada Lovelace met Charles  Babbage in London. London is big.",
    "entities": [
        {"text": "Ada Lovelace", "type": "PER"},
        {"text": "Charles  Babbage", "type": "PER"},
        {"text": "London", "type": "LOC"},
        {"text": "London", "type": "LOC"},
    ],
}


def test_span_form_multiset_matching() -> None:
    output = json.dumps(
        [
            {"text": "Ada Lovelace", "type": "per"},  # type spelled like the gold type
            {"text": "Charles Babbage", "type": "PER"},  # whitespace collapsed
            {"text": "London", "type": "LOC"},  # one of the two Londons
            {"text": "london", "type": "LOC"},  # text case is kept: no match
            {"text": "Ada", "type": "PER"},
        ]
    )
    scores, flags = _ner(SPAN_RECORD, output)
    assert (scores["tp"], scores["fp"], scores["fn"]) == (3.0, 2.0, 1.0)
    assert scores["f1"] == pytest.approx(6 / 9)
    assert flags == ()


def test_empty_gold_and_empty_prediction_is_perfect() -> None:
    scores, flags = _ner({"text": "nothing here", "entities": []}, "[]")
    assert scores == {"tp": 0.0, "fp": 0.0, "fn": 0.0, "f1": 1.0}
    assert flags == ()


def test_unparseable_and_invalid_items_are_flagged() -> None:
    scores, flags = _ner(SPAN_RECORD, "I could not find any.")
    assert flags == ("unparseable_output",)
    assert (scores["tp"], scores["fp"], scores["fn"]) == (0.0, 0.0, 4.0)
    scores, flags = _ner(SPAN_RECORD, '[{"text": "London", "type": "LOC"}, {"text": 3}, "x"]')
    assert flags == ("invalid_entity",)
    assert scores["tp"] == 1.0


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('[{"text": "A", "type": "PER"}]', (("A", "PER"),)),
        ('```json\n[{"text": "A", "type": "PER"}]\n```', (("A", "PER"),)),
        ('```\n{"entities": [{"text": "A", "type": "PER"}]}\n```', (("A", "PER"),)),
        ('Entities [1] are: [{"text": "A", "type": "PER"}].', (("A", "PER"),)),
        ('{"entities": []}', ()),
        ("[]", ()),
        ('```json\n[{"text": "A", "type": "PER"}]', (("A", "PER"),)),  # unclosed fence
        ('[{"text": "A", "type": "PER", "start": 0}]', (("A", "PER"),)),  # extra keys
        ("[1, 2, 3]", None),
        ('{"people": ["A"]}', None),
        ("[{oops", None),
        ("", None),
        ("[" * 100_000, None),  # deep nesting: RecursionError inside json is contained
    ],
)
def test_parser(output: str, expected: tuple[tuple[str, str], ...] | None) -> None:
    assert parse_entities(output).entities == expected
