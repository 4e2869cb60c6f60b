"""Property tests: the normalisers, the label rules and the entity parser never raise,
whatever the model wrote."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evald_server.domain import TaskType
from evald_server.scoring import score_task
from evald_server.scoring._entities import parse_entities
from evald_server.scoring._labels import LabelMatcher
from evald_server.scoring._normalize import (
    collapse_whitespace,
    generation_key,
    label_key,
    squad_best,
    squad_exact_match,
    squad_f1,
    squad_normalize,
)
from tests.scoring._factories import samples_of
from tests.scoring.test_intervals import STRUCTURED_RECORD, TOOL_RECORD

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(max_size=200)
# Text rich in the characters the parsers and label rules look at.
MODEL_TEXT = (
    st.text(alphabet=st.sampled_from('[]{}":,`\n json entities text type ABab().'), max_size=200)
    | TEXT
)


@SETTINGS
@given(TEXT)
def test_normalisers_never_raise_and_are_idempotent(text: str) -> None:
    for normalise in (collapse_whitespace, label_key, generation_key, squad_normalize):
        once = normalise(text)
        assert isinstance(once, str)
        assert normalise(once) == once


@SETTINGS
@given(TEXT, TEXT)
def test_squad_metrics_are_fractions(prediction: str, truth: str) -> None:
    assert squad_exact_match(prediction, truth) in (0.0, 1.0)
    assert 0.0 <= squad_f1(prediction, truth) <= 1.0
    assert squad_f1(prediction, truth) == squad_f1(truth, prediction)


@SETTINGS
@given(TEXT, st.lists(TEXT, min_size=1, max_size=4))
def test_squad_best_is_the_maximum_over_answers(prediction: str, answers: list[str]) -> None:
    assert squad_best(prediction, answers) == (
        max(squad_exact_match(prediction, a) for a in answers),
        max(squad_f1(prediction, a) for a in answers),
    )


@SETTINGS
@given(
    st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=6), st.booleans(), MODEL_TEXT
)
def test_label_rules_never_raise(candidates: list[str], lettered: bool, output: str) -> None:
    found = LabelMatcher(candidates, lettered=lettered).match(output)
    assert found is None or found in candidates


@SETTINGS
@given(MODEL_TEXT)
def test_entity_parser_never_raises(output: str) -> None:
    parsed = parse_entities(output)
    assert parsed.entities is None or all(
        isinstance(text, str) and isinstance(kind, str) for text, kind in parsed.entities
    )
    assert parsed.dropped >= 0


ENTITIES = st.lists(st.fixed_dictionaries({"text": TEXT, "type": st.text(max_size=10)}), max_size=5)


@SETTINGS
@given(
    ENTITIES,
    st.sampled_from(["{}", "```json\n{}\n```", "Answer:\n{}\nThanks", '{{"entities": {}}}']),
)
def test_entity_parser_reads_what_a_model_writes(
    entities: list[dict[str, str]], frame: str
) -> None:
    output = frame.format(json.dumps(entities))
    parsed = parse_entities(output)
    assert parsed.entities == tuple((e["text"], e["type"]) for e in entities)


@SETTINGS
@given(st.sampled_from(list(TaskType)), st.lists(MODEL_TEXT, min_size=1, max_size=5))
def test_scorers_never_raise_on_model_output(task_type: TaskType, outputs: list[str]) -> None:
    records: dict[TaskType, dict[str, object]] = {
        TaskType.CLASSIFICATION: {"input": "x", "label": "B", "choices": ["A", "B", "C"]},
        TaskType.QA: {"question": "q", "answers": ["an answer"]},
        TaskType.NER: {"tokens": ["Ada", "Lovelace"], "tags": ["B-PER", "I-PER"]},
        TaskType.SUMMARIZATION: {"document": "d", "summary": "a short summary"},
        TaskType.GENERATION: {"input": "q", "reference": "#### 42", "match": "numeric"},
        TaskType.MULTIPLE_CHOICE: {
            "question": "q",
            "choices": ["Ada", "Lovelace", "an answer"],
            "answer_letter": "B",
            "metadata": {"subject": "history"},
        },
        # Code: the verdict comes from the stored sandbox run; none here (an error each).
        TaskType.CODE: {
            "prompt": "def f():\n",
            "test": "def check(c):\n    pass\n",
            "entry_point": "f",
        },
        TaskType.TOOL_CALL: TOOL_RECORD,
        TaskType.STRUCTURED_OUTPUT: STRUCTURED_RECORD,
    }
    record = records[task_type]
    report = score_task(task_type, samples_of([(record, o) for o in outputs]), resamples=5)
    assert report.scored_samples == len(outputs)
    assert all(0.0 <= value <= 1.0 for value in report.metrics.values())
