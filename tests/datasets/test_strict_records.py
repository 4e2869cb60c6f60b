"""What plain ``json.loads`` and the record schemas used to let through: each is refused
with its reason, line and field (the path of the value inside the record)."""

import pytest

from evald_server.datasets import parse_jsonl, validate_template
from evald_server.datasets._prompts import MAX_TEMPLATE_CHARS
from evald_server.datasets._strict_json import MAX_NESTING
from evald_server.domain import DatasetInvalid, ErrorReason, TaskType

LIMITS = {"max_records": 100, "max_record_bytes": 1 << 20}
FIRST = {  # a valid line 1, so that the bad line is line 2
    TaskType.CLASSIFICATION: b'{"id": "first", "input": "text", "label": "pos"}\n',
    TaskType.NER: b'{"id": "first", "text": "Ann", "entities": [{"text": "Ann", "type": "P"}]}\n',
    TaskType.QA: b'{"id": "first", "question": "q?", "answers": ["a"]}\n',
    TaskType.GENERATION: b'{"id": "first", "input": "i", "reference": "r"}\n',
}


def _rejected(task_type: TaskType, data: bytes) -> DatasetInvalid:
    with pytest.raises(DatasetInvalid) as caught:
        parse_jsonl(task_type, [data], **LIMITS)
    return caught.value


def _nested(depth: int) -> bytes:
    return (
        b'{"input": "t", "label": "p", "metadata": ' + b'{"a": ' * depth + b"1" + b"}" * (depth + 1)
    )


@pytest.mark.parametrize(
    ("task_type", "line", "reason", "field"),
    [
        # A lone surrogate is valid JSON but no UTF-8 text: it cannot be stored or hashed.
        (
            TaskType.CLASSIFICATION,
            b'{"id": "\\ud800", "input": "t", "label": "p"}',
            ErrorReason.DATASET_ENCODING_ERROR,
            "id",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "t", "label": "p", "metadata": {"k": ["ok", "x\\udfff"]}}',
            ErrorReason.DATASET_ENCODING_ERROR,
            "metadata.k[1]",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "t", "label": "p", "metadata": {"\\udfff": 1}}',
            ErrorReason.DATASET_ENCODING_ERROR,
            "metadata",
        ),
        # Two equal keys: json.loads keeps the last one silently.
        (
            TaskType.CLASSIFICATION,
            b'{"input": "t", "label": "pos", "label": "neg"}',
            ErrorReason.DATASET_PARSE_ERROR,
            "label",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "t", "label": "p", "metadata": {"m": {"k": 1, "k": 2}}}',
            ErrorReason.DATASET_PARSE_ERROR,
            "metadata.m.k",
        ),
        # A number that does not fit a double became inf, stored as null.
        (
            TaskType.CLASSIFICATION,
            b'{"input": "t", "label": "p", "metadata": {"big": 1e400}}',
            ErrorReason.DATASET_FIELD_INVALID,
            "metadata.big",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "t", "label": "p", "metadata": {"neg": [-1e999]}}',
            ErrorReason.DATASET_FIELD_INVALID,
            "metadata.neg[0]",
        ),
        # Blank text makes a blank prompt or an unmatchable label.
        (
            TaskType.CLASSIFICATION,
            b'{"input": " \\t\\n", "label": "p"}',
            ErrorReason.DATASET_FIELD_INVALID,
            "input",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "t", "label": "   "}',
            ErrorReason.DATASET_FIELD_INVALID,
            "label",
        ),
        (TaskType.NER, b'{"text": "", "entities": []}', ErrorReason.DATASET_FIELD_INVALID, "text"),
        (
            TaskType.NER,
            b'{"text": "  ", "entities": []}',
            ErrorReason.DATASET_FIELD_INVALID,
            "text",
        ),
        (
            TaskType.QA,
            b'{"question": " ", "answers": ["a"]}',
            ErrorReason.DATASET_FIELD_INVALID,
            "question",
        ),
        (
            TaskType.GENERATION,
            b'{"input": "i", "reference": "\\n"}',
            ErrorReason.DATASET_FIELD_INVALID,
            "reference",
        ),
    ],
)
def test_values_json_loads_accepts_are_refused_by_line_and_field(
    task_type: TaskType, line: bytes, reason: ErrorReason, field: str
) -> None:
    error = _rejected(task_type, FIRST[task_type] + line + b"\n")
    assert error.reason is reason, error.message
    assert error.metadata["line"] == "2"
    assert error.metadata["field"] == field, error.message
    assert error.message.startswith(f"line 2, field {field!r}: ")


def test_metadata_nesting_is_bounded_below_what_serialisation_allows() -> None:
    parse_jsonl(TaskType.CLASSIFICATION, [_nested(MAX_NESTING - 1)], **LIMITS)
    for depth in (MAX_NESTING + 1, 900):  # 900 hit pydantic's serialisation limit
        error = _rejected(TaskType.CLASSIFICATION, _nested(depth))
        assert error.reason is ErrorReason.DATASET_FIELD_INVALID
        assert error.metadata["field"].startswith("metadata.a.a")
        assert f"deeper than {MAX_NESTING} levels" in error.message


def test_valid_non_ascii_text_and_paired_surrogates_are_kept() -> None:
    data = b'{"input": "caf\\u00e9 \\ud83d\\ude00", "label": "p", "metadata": {"x": 1.5e300}}\n'
    (record,) = parse_jsonl(TaskType.CLASSIFICATION, [data], **LIMITS).records
    assert record.fields["input"] == "café 😀"
    assert record.fields["metadata"] == {"x": 1.5e300}


def test_an_implicit_id_collision_says_the_id_is_the_line_number() -> None:
    error = _rejected(
        TaskType.CLASSIFICATION,
        b'{"id": "2", "input": "t", "label": "p"}\n{"input": "u", "label": "p"}\n',
    )
    assert error.reason is ErrorReason.DATASET_DUPLICATE_ID
    assert dict(error.metadata) == {"line": "2", "field": "id", "firstLine": "1"}
    assert "no id, so its id is its line number, '2'" in error.message
    assert "line 1 already uses" in error.message


def test_templates_need_a_placeholder_and_fit_a_bound() -> None:
    validate_template(TaskType.CLASSIFICATION, "Classify: {input}")
    for template in ("Classify this.", "", "literal {{input}} only"):
        with pytest.raises(DatasetInvalid, match="has no placeholder"):
            validate_template(TaskType.CLASSIFICATION, template)
    too_long = "{input}" + "x" * MAX_TEMPLATE_CHARS
    with pytest.raises(DatasetInvalid) as caught:
        validate_template(TaskType.CLASSIFICATION, too_long)
    assert caught.value.metadata["limitValue"] == str(MAX_TEMPLATE_CHARS)
    assert f"over the limit of {MAX_TEMPLATE_CHARS}" in caught.value.message
