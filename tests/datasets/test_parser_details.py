"""What the mutation run showed unpinned in the parser: the content hash's canonical
form, the exact messages of constant and unknown-field errors, frozen records."""

import dataclasses
import hashlib
import json

import pytest

from evald_server.datasets import parse_jsonl
from evald_server.domain import DatasetInvalid, ErrorReason, TaskType

LIMITS = {"max_records": 10, "max_record_bytes": 4096}


def test_the_content_hash_is_sha256_of_canonical_json_lines() -> None:
    records = [
        {"label": "positif", "input": "très bien", "id": "a"},  # keys out of order, not ASCII
        {"input": "naïve 😀", "label": "négatif"},
    ]
    body = "\n".join(json.dumps(r, ensure_ascii=False, indent=1) for r in records)
    body = body.replace("\n ", " ").replace("\n}", "}")  # one record per line
    parsed = parse_jsonl(TaskType.CLASSIFICATION, [body.encode()], **LIMITS)
    expected = hashlib.sha256()
    for record_id, record in (("a", records[0]), ("2", records[1])):
        fields = {k: v for k, v in record.items() if k != "id"}
        canonical = json.dumps(
            {"id": record_id, **fields}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        expected.update(canonical.encode() + b"\n")
    assert parsed.content_sha256 == expected.hexdigest()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_constants_are_refused_by_name(constant: str) -> None:
    body = f'{{"input": "a", "label": {constant}}}'.encode()
    with pytest.raises(DatasetInvalid) as caught:
        parse_jsonl(TaskType.CLASSIFICATION, [body], **LIMITS)
    assert caught.value.reason is ErrorReason.DATASET_PARSE_ERROR
    assert caught.value.message == f"line 1: invalid JSON: {constant} is not valid JSON"


def test_an_unknown_field_and_a_wrong_type_say_different_things() -> None:
    with pytest.raises(DatasetInvalid) as unknown:
        parse_jsonl(TaskType.QA, [b'{"question": "q", "answers": ["a"], "bogus": 1}'], **LIMITS)
    assert unknown.value.reason is ErrorReason.DATASET_FIELD_INVALID
    assert unknown.value.message == "line 1, field 'bogus': unknown field"
    with pytest.raises(DatasetInvalid) as wrong:
        parse_jsonl(TaskType.QA, [b'{"question": 3, "answers": ["a"]}'], **LIMITS)
    assert wrong.value.reason is ErrorReason.DATASET_FIELD_INVALID
    assert wrong.value.metadata["field"] == "question"
    assert "unknown field" not in wrong.value.message
    with pytest.raises(DatasetInvalid) as missing:
        parse_jsonl(TaskType.QA, [b'{"answers": ["a"]}'], **LIMITS)
    assert missing.value.reason is ErrorReason.DATASET_FIELD_MISSING
    assert missing.value.message == "line 1, field 'question': field is required"


def test_parsed_records_are_frozen_values() -> None:
    parsed = parse_jsonl(TaskType.QA, [b'{"question": "q", "answers": ["a"]}'], **LIMITS)
    record = parsed.records[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.line = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.content_sha256 = ""  # type: ignore[misc]
    assert not hasattr(record, "__dict__")
    assert not hasattr(parsed, "__dict__")


def test_the_hash_sorts_keys_whatever_order_the_schema_has() -> None:
    # QA's schema order (question, answers) is not sorted: the canonical form is.
    body = b'{"question": "q?", "answers": ["a", "b"], "id": "x"}'
    parsed = parse_jsonl(TaskType.QA, [body], **LIMITS)
    canonical = b'{"answers":["a","b"],"id":"x","question":"q?"}\n'
    assert parsed.content_sha256 == hashlib.sha256(canonical).hexdigest()
