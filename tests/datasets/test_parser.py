"""The JSONL parser: every bad record names its line and field; good ones normalise."""

import json

import pytest

from evald_server.datasets import parse_jsonl
from evald_server.domain import DatasetInvalid, ErrorReason, ResourceExhausted, TaskType

LIMITS = {"max_records": 100, "max_record_bytes": 4096}


def lines(*records: object) -> list[bytes]:
    return [("\n".join(json.dumps(r) for r in records) + "\n").encode()]


def parse(task_type: TaskType, data: bytes | list[bytes]) -> object:
    chunks = [data] if isinstance(data, bytes) else data
    return parse_jsonl(task_type, chunks, **LIMITS)


def test_records_get_ids_from_their_line_numbers_unless_given() -> None:
    parsed = parse_jsonl(
        TaskType.QA,
        lines(
            {"question": "q1", "answers": ["a"]}, {"id": "x", "question": "q2", "answers": ["b"]}
        ),
        **LIMITS,
    )
    assert [r.record_id for r in parsed.records] == ["1", "x"]
    assert [r.line for r in parsed.records] == [1, 2]
    assert parsed.records[0].fields == {"question": "q1", "answers": ["a"]}


def test_chunk_boundaries_and_blank_lines_do_not_change_the_result() -> None:
    data = b'{"document": "d1", "summary": "s1"}\n\n\r\n{"document": "d2", "summary": "s2"}'
    whole = parse(TaskType.SUMMARIZATION, data)
    for cut in range(1, len(data)):
        split = parse(TaskType.SUMMARIZATION, [data[:cut], data[cut:]])
        assert split == whole
    assert [r.line for r in whole.records] == [1, 4]  # type: ignore[attr-defined]


def test_hash_ignores_formatting_but_not_content() -> None:
    compact = b'{"input":"a","label":"x"}\n'
    spaced = b'{ "label" : "x",  "input" : "a" }\n'
    other = b'{"input":"a","label":"y"}\n'
    hashes = [parse(TaskType.CLASSIFICATION, d).content_sha256 for d in (compact, spaced, other)]  # type: ignore[attr-defined]
    assert hashes[0] == hashes[1] != hashes[2]


@pytest.mark.parametrize(
    ("task_type", "data", "reason", "line", "field"),
    [
        (
            TaskType.CLASSIFICATION,
            b'{"input": "a", "label": "x"}\n{"input": "b"',
            ErrorReason.DATASET_PARSE_ERROR,
            2,
            None,
        ),
        (TaskType.CLASSIFICATION, b'{"input": "a"}', ErrorReason.DATASET_FIELD_MISSING, 1, "label"),
        (
            TaskType.CLASSIFICATION,
            b'{"input": 3, "label": "x"}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "input",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "", "label": "x"}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "input",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "a", "label": "z", "choices": ["x", "y"]}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "label",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "a", "label": "x", "choices": ["x", "x"]}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "choices",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "a", "lable": "x", "label": "x"}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "lable",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "a", "label": "x", "metadata": 5}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "metadata",
        ),
        (TaskType.CLASSIFICATION, b'["input", "label"]', ErrorReason.DATASET_PARSE_ERROR, 1, None),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "a", "label": NaN}',
            ErrorReason.DATASET_PARSE_ERROR,
            1,
            None,
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"input": "caf\xe9", "label": "x"}',
            ErrorReason.DATASET_ENCODING_ERROR,
            1,
            None,
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"id": 1, "input": "a", "label": "x"}\n{"id": "1", "input": "b", "label": "x"}',
            ErrorReason.DATASET_DUPLICATE_ID,
            2,
            "id",
        ),
        (
            TaskType.CLASSIFICATION,
            b'{"id": 1.5, "input": "a", "label": "x"}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "id",
        ),
        (
            TaskType.QA,
            b'{"question": "q", "answers": []}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "answers",
        ),
        (
            TaskType.QA,
            b'{"question": "q", "answers": "a"}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "answers",
        ),
        (
            TaskType.QA,
            b'{"question": "q", "context": 4, "answers": ["a"]}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "context",
        ),
        (
            TaskType.NER,
            b'{"tokens": ["a", "b"], "tags": ["O"]}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "tags",
        ),
        (
            TaskType.NER,
            b'{"tokens": ["a"], "tags": ["X-PER"]}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "tags[0]",
        ),
        (TaskType.NER, b'{"text": "Ann met Bo"}', ErrorReason.DATASET_FIELD_MISSING, 1, "entities"),
        (
            TaskType.NER,
            b'{"text": "Ann", "entities": [{"text": "Bo", "type": "PER"}]}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "entities[0].text",
        ),
        (
            TaskType.NER,
            b'{"text": "Ann", "entities": [{"text": "Ann"}]}',
            ErrorReason.DATASET_FIELD_MISSING,
            1,
            "entities.0.type",
        ),
        (
            TaskType.NER,
            b'{"text": "a", "entities": [], "tokens": ["a"], "tags": ["O"]}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "use either text + entities or tokens + tags, not both",
        ),
        (
            TaskType.SUMMARIZATION,
            b'{"document": "d"}',
            ErrorReason.DATASET_FIELD_MISSING,
            1,
            "summary",
        ),
        (
            TaskType.GENERATION,
            b'{"input": "i", "reference": "r", "match": "fuzzy"}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "match",
        ),
        (
            TaskType.GENERATION,
            b'{"input": "i", "reference": "([", "match": "regex"}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "reference",
        ),
        (
            TaskType.GENERATION,
            b'{"input": "i", "reference": "none", "match": "numeric"}',
            ErrorReason.DATASET_FIELD_INVALID,
            1,
            "reference",
        ),
    ],
)
def test_bad_records_name_reason_line_and_field(
    task_type: TaskType, data: bytes, reason: ErrorReason, line: int, field: str | None
) -> None:
    with pytest.raises(DatasetInvalid) as caught:
        parse(task_type, data)
    error = caught.value
    assert error.reason is reason
    assert error.metadata["line"] == str(line)
    assert error.message.startswith(f"line {line}")
    if field is not None and " " not in field:
        assert error.metadata["field"] == field
        assert error.field_violations[0].field.endswith(field)


def test_empty_upload_is_rejected() -> None:
    with pytest.raises(DatasetInvalid) as caught:
        parse(TaskType.QA, b"\n\n")
    assert caught.value.reason is ErrorReason.DATASET_EMPTY


def test_record_and_dataset_size_limits_are_named() -> None:
    # A size limit is RESOURCE_EXHAUSTED (the error table), so not a DatasetInvalid.
    long_line = json.dumps({"input": "x" * 5000, "label": "a"}).encode()
    with pytest.raises(ResourceExhausted) as caught:
        parse(TaskType.CLASSIFICATION, [long_line[:3000], long_line[3000:]])
    assert caught.value.reason is ErrorReason.DATASET_TOO_LARGE
    assert caught.value.metadata["limit"] == "max_record_bytes"

    many = lines(*({"input": str(i), "label": "a"} for i in range(101)))
    with pytest.raises(ResourceExhausted) as caught:
        parse(TaskType.CLASSIFICATION, many)
    assert caught.value.reason is ErrorReason.DATASET_TOO_LARGE
    assert caught.value.metadata == {
        "line": "101",
        "limit": "max_records_per_dataset",
        "limitValue": "100",
    }


def test_gsm8k_numeric_reference_is_accepted() -> None:
    parsed = parse(
        TaskType.GENERATION, b'{"input": "2+2?", "reference": "so 4\\n#### 4", "match": "numeric"}'
    )
    assert parsed.records[0].fields["match"] == "numeric"  # type: ignore[attr-defined]
