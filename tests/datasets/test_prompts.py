"""Prompt rendering: defaults per task type, custom templates, and no gold leakage."""

import pytest

from evald_server.datasets import (
    expected_text,
    render_prompt,
    simulator_reference,
    template_sha256,
    validate_template,
)
from evald_server.domain import DatasetInvalid, ErrorReason, TaskType

RECORDS = {
    TaskType.CLASSIFICATION: {
        "input": "great film",
        "label": "positive",
        "choices": ["positive", "negative"],
    },
    TaskType.QA: {"question": "Who wrote it?", "context": "Ann wrote it.", "answers": ["Ann"]},
    TaskType.NER: {
        "tokens": ["Ann", "visited", "New", "York"],
        "tags": ["B-PER", "O", "B-LOC", "I-LOC"],
    },
    TaskType.SUMMARIZATION: {"document": "One. Two. Three.", "summary": "Numbers counted."},
    TaskType.GENERATION: {"input": "What is 6*7?", "reference": "#### 42", "match": "numeric"},
    TaskType.MULTIPLE_CHOICE: {"question": "6*7?", "choices": ["41", "42"], "answer_index": 1},
    TaskType.CODE: {
        "prompt": 'def add(a, b):\n    """The sum."""\n',
        "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
        "entry_point": "add",
        "canonical_solution": "    return a + b\n",
    },
    TaskType.TOOL_CALL: {
        "input": "Weather in Oslo?",
        "tools": [{"type": "function", "function": {"name": "weather"}}],
        "expected_calls": [{"name": "weather", "arguments": {"city": "Oslo-gold"}}],
    },
    TaskType.STRUCTURED_OUTPUT: {
        "input": "Name the capital of Norway.",
        "json_schema": {"type": "object", "properties": {"capital": {"type": "string"}}},
        "reference": {"capital": "Oslo-gold"},
    },
}
GOLD = {
    TaskType.CLASSIFICATION: None,  # the label is one of the choices shown on purpose
    TaskType.QA: "Ann wrote",  # an answer may occur in the context; the answers list may not
    TaskType.NER: "B-PER",
    TaskType.SUMMARIZATION: "Numbers counted.",
    TaskType.GENERATION: "####",
    TaskType.MULTIPLE_CHOICE: None,  # every choice is shown on purpose; no gold field is
    TaskType.CODE: "return a + b",  # neither the solution nor HumanEval's hidden test
    TaskType.TOOL_CALL: "Oslo-gold",  # the tools go in the request, the calls nowhere
    TaskType.STRUCTURED_OUTPUT: "Oslo-gold",  # the schema is shown, the reference never
}


@pytest.mark.parametrize("task_type", list(TaskType))
def test_default_prompt_shows_the_input_and_never_the_gold(task_type: TaskType) -> None:
    (message,) = render_prompt(task_type, RECORDS[task_type])
    assert message.role == "user"
    assert message.content
    gold = GOLD[task_type]
    if gold is not None and task_type is not TaskType.QA:
        assert gold not in message.content
    if task_type is TaskType.CODE:
        assert "candidate(2, 3)" not in message.content


def test_custom_template_fills_placeholders_and_escapes_braces() -> None:
    template = 'Q: {question}\nC: {context}\nReply as {{"answer": ...}}'
    validate_template(TaskType.QA, template)
    (message,) = render_prompt(TaskType.QA, RECORDS[TaskType.QA], template)
    assert message.content == 'Q: Who wrote it?\nC: Ann wrote it.\nReply as {"answer": ...}'


@pytest.mark.parametrize(
    ("template", "detail"),
    [
        ("Answer {answers}", "placeholder"),
        ("Label {label}", "placeholder"),
        ("{input", "offset"),
        ("x } y", "offset"),
    ],
)
def test_templates_that_could_leak_gold_or_are_malformed_are_rejected(
    template: str, detail: str
) -> None:
    task_type = TaskType.QA if "answers" in template else TaskType.CLASSIFICATION
    with pytest.raises(DatasetInvalid) as caught:
        validate_template(task_type, template)
    assert caught.value.reason is ErrorReason.DATASET_HEADER_INVALID
    assert detail in caught.value.metadata


def test_expected_text_and_simulator_reference() -> None:
    assert expected_text(TaskType.NER, RECORDS[TaskType.NER]) == (
        '[{"text": "Ann", "type": "PER"}, {"text": "New York", "type": "LOC"}]'
    )
    assert (
        simulator_reference(TaskType.GENERATION, RECORDS[TaskType.GENERATION])["expected"] == "42"
    )
    classification = simulator_reference(TaskType.CLASSIFICATION, RECORDS[TaskType.CLASSIFICATION])
    assert classification == {"expected": "positive", "distractors": ["negative"]}


def test_template_hash_tells_templates_apart() -> None:
    default = template_sha256(TaskType.QA, None)
    assert default == template_sha256(TaskType.QA, None)
    assert default != template_sha256(TaskType.QA, "{question}")
    assert template_sha256(TaskType.QA, "{question}") != template_sha256(
        TaskType.GENERATION, "{question}"
    )
