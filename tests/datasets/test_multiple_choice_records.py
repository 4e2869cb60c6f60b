"""Multiple-choice records: question, optional context, 2-26 choices, one gold field."""

import json

import pytest

from evald_server.datasets import expected_text, parse_jsonl, render_prompt, simulator_reference
from evald_server.domain import DatasetInvalid, ErrorReason, TaskType

LIMITS = {"max_records": 100, "max_record_bytes": 8192}


def parse(*records: object) -> object:
    data = ("\n".join(json.dumps(r) for r in records) + "\n").encode()
    return parse_jsonl(TaskType.MULTIPLE_CHOICE, [data], **LIMITS)


def test_gold_as_index_or_letter() -> None:
    parsed = parse(
        {"question": "q", "choices": ["a", "b"], "answer_index": 1},
        {"question": "q", "context": "c", "choices": ["a", "b", "c"], "answer_letter": "c"},
    )
    fields = [r.fields for r in parsed.records]  # type: ignore[attr-defined]
    assert expected_text(TaskType.MULTIPLE_CHOICE, fields[0]) == "B. b"
    assert expected_text(TaskType.MULTIPLE_CHOICE, fields[1]) == "C. c"
    assert simulator_reference(TaskType.MULTIPLE_CHOICE, fields[1]) == {
        "expected": "C",
        "distractors": ["A", "B"],
    }


@pytest.mark.parametrize(
    ("record", "reason", "field", "fragment"),
    [
        (
            {"question": "q", "choices": ["a", "b"]},
            "DATASET_FIELD_MISSING",
            "answer_index",
            "or answer_letter",
        ),
        (
            {"question": "q", "choices": ["a", "b"], "answer_index": 0, "answer_letter": "A"},
            "DATASET_FIELD_INVALID",
            "answer_letter",
            "not both",
        ),
        (
            {"question": "q", "choices": ["a", "b"], "answer_index": 2},
            "DATASET_FIELD_INVALID",
            "answer_index",
            "beyond the 2 choices",
        ),
        (
            {"question": "q", "choices": ["a", "b"], "answer_letter": "D"},
            "DATASET_FIELD_INVALID",
            "answer_letter",
            "beyond",
        ),
        (
            {"question": "q", "choices": ["a", "b"], "answer_letter": "AB"},
            "DATASET_FIELD_INVALID",
            "answer_letter",
            "pattern",
        ),
        (
            {"question": "q", "choices": ["a", "b"], "answer_index": -1},
            "DATASET_FIELD_INVALID",
            "answer_index",
            "greater than",
        ),
        (
            {"question": "q", "choices": ["a"], "answer_index": 0},
            "DATASET_FIELD_INVALID",
            "choices",
            "at least 2",
        ),
        (
            {"question": "q", "choices": [str(i) for i in range(27)], "answer_index": 0},
            "DATASET_FIELD_INVALID",
            "choices",
            "at most 26",
        ),
        (
            {"question": "", "choices": ["a", "b"], "answer_index": 0},
            "DATASET_FIELD_INVALID",
            "question",
            "at least 1",
        ),
        (
            {"question": "q", "choices": ["a", "b"], "answer": 0},
            "DATASET_FIELD_INVALID",
            "answer",
            "unknown field",
        ),
    ],
)
def test_bad_records_name_their_field(
    record: dict[str, object], reason: str, field: str, fragment: str
) -> None:
    with pytest.raises(DatasetInvalid) as caught:
        parse({"question": "ok", "choices": ["a", "b"], "answer_index": 0}, record)
    error = caught.value
    assert error.reason is ErrorReason[reason]
    assert error.metadata["line"] == "2"
    assert error.metadata["field"] == field
    assert fragment in error.message


def test_default_prompt_letters_the_choices_and_subject_is_a_placeholder() -> None:
    fields = {
        "question": "2 + 2 = ?",
        "context": "Arithmetic.",
        "choices": ["3", "4"],
        "answer_index": 1,
        "metadata": {"subject": "elementary_mathematics"},
    }
    (message,) = render_prompt(TaskType.MULTIPLE_CHOICE, fields)
    assert message.content == (
        "Answer the multiple-choice question with the letter of the correct choice.\n\n"
        "Arithmetic.\n\n2 + 2 = ?\nA. 3\nB. 4\nAnswer:"
    )
    (custom,) = render_prompt(
        TaskType.MULTIPLE_CHOICE, fields, "About {subject}.\n{question}\n{choices}\nAnswer:"
    )
    assert custom.content == "About elementary_mathematics.\n2 + 2 = ?\nA. 3\nB. 4\nAnswer:"


def test_choices_that_read_the_same_fail_the_upload_naming_each_record() -> None:
    from evald_server.datasets._parser import MAX_REPORTED_RECORDS

    good = {"question": "q", "choices": ["\u22124", "\u22122", "10", "2"], "answer_index": 1}
    colliding = {"question": "q", "choices": ["x", "-1", "\u22121"], "answer_index": 0}
    count = MAX_REPORTED_RECORDS + 5
    with pytest.raises(DatasetInvalid) as caught:
        parse(good, *({**colliding, "id": f"c{i}"} for i in range(count)), good)
    error = caught.value
    assert error.reason is ErrorReason.DATASET_FIELD_INVALID
    fields = [v.field for v in error.field_violations]
    assert fields == [
        f"records[line {line}].choices" for line in range(2, 2 + MAX_REPORTED_RECORDS)
    ]
    assert error.metadata == {"line": "2", "field": "choices", "records": str(count)}
    # Like every dataset error, the message starts with the line (and field) it names.
    assert error.message.startswith("line 2, field 'choices': record 'c0': choices B")
    assert f"; {count} record(s) have choices an answer could not tell apart" in error.message
    assert "and 5 more" in error.message
    assert "record 'c0': choices B '-1' and C '\u22121' read the same ('-1')" in error.message


@pytest.mark.parametrize(
    ("choices", "said"),
    [
        (["B", "A", "C"], "A 'B' is the letter of choice B; B 'A' is the letter of choice A"),
        (["x", " c ", "y"], "B ' c ' is the letter of choice C"),
        (["2", "-2", "a", "\u22122"], "B '-2' and D '\u22122' read the same ('-2'); C 'a' is the "),
    ],
)
def test_a_choice_whose_text_is_another_choices_letter_is_refused(
    choices: list[str], said: str
) -> None:
    with pytest.raises(DatasetInvalid) as caught:
        parse({"question": "q", "choices": choices, "answer_index": 0})
    (violation,) = caught.value.field_violations
    assert said in violation.description


def test_letters_that_name_their_own_choice_or_none_are_choices_like_any_other() -> None:
    parsed = parse(
        {"question": "q", "choices": ["A", "B", "C"], "answer_index": 0},  # in order
        {"question": "q", "choices": ["x", "y", "z"], "answer_index": 0},  # beyond the choices
        {"question": "q", "choices": ["No", "B", "AB"], "answer_index": 0},
        {"question": "q", "choices": ["0", "\u00df", "\u00e9", "\u01c5"], "answer_index": 1},
    )
    assert len(parsed.records) == 4  # type: ignore[attr-defined]


def test_a_bad_line_after_colliding_choices_is_reported_as_before() -> None:
    colliding = {"question": "q", "choices": ["a", "A"], "answer_index": 0}
    with pytest.raises(DatasetInvalid) as caught:
        parse(colliding, {"question": "q", "choices": ["a"], "answer_index": 0})
    assert (caught.value.metadata["line"], caught.value.metadata["field"]) == ("2", "choices")
    assert "at least 2" in caught.value.message
