"""Code records: both published shapes validate unchanged; bad ones name the field."""

from typing import Any

import pytest
from pydantic import ValidationError

from evald_server.code_tasks import CodeRecord, ProblemStyle, code_problem

HUMANEVAL = {
    "task_id": "HumanEval/0",
    "prompt": 'def add(a, b):\n    """Add."""\n',
    "canonical_solution": "    return a + b\n",
    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
    "entry_point": "add",
}
MBPP = {
    "task_id": 11,
    "text": "Write a python function to remove first and last occurrence of a given character.",
    "code": "def remove_Occ(s,ch): \r\n    return s.replace(ch, '')",
    "test_list": [
        'assert remove_Occ("hello","l") == "heo"',
        'assert remove_Occ("abcda","a") == "bcd"',
    ],
    "test_setup_code": "",
    "challenge_test_list": [],
}


def test_humaneval_and_mbpp_records_validate_as_published() -> None:
    problem = code_problem(CodeRecord.model_validate(HUMANEVAL).model_dump(exclude_none=True))
    assert problem.style is ProblemStyle.HUMANEVAL
    assert problem.entry_point == "add"
    assert problem.tests == (HUMANEVAL["test"] + "\n\ncheck(add)\n",)
    assert problem.reference == "    return a + b\n"
    problem = code_problem(CodeRecord.model_validate(MBPP).model_dump(exclude_none=True))
    assert problem.style is ProblemStyle.MBPP
    assert problem.entry_point == "remove_Occ"
    assert problem.tests == tuple(MBPP["test_list"])  # type: ignore[arg-type]


def test_mbpp_without_reference_code_takes_the_first_function_its_test_calls() -> None:
    record = {
        "text": "Find similar elements.",
        "test_list": ["assert set(similar_elements((3, 4), (4, 5))) == set((4,))"],
    }
    problem = code_problem(CodeRecord.model_validate(record).model_dump(exclude_none=True))
    assert problem.entry_point == "similar_elements"  # not the builtin set


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"entry_point": None}, "entry_point: Field required"),
        ({"entry_point": "not valid"}, "entry_point: 'not valid' is not a Python identifier"),
        ({"entry_point": "class"}, "is not a Python identifier"),
        ({"test": "assert add(1, 2) == 3\n"}, "test: defines no check(candidate) function"),
        ({"prompt": "   \n"}, "prompt: must not be blank"),
        ({"prompt": "x" * (256 * 1024 + 1)}, "prompt"),
        ({"text": "and MBPP"}, "text: a record is HumanEval-shaped"),
        ({"extra": 1}, "extra"),
    ],
)
def test_a_bad_humaneval_record_names_the_field(change: dict[str, Any], message: str) -> None:
    record = {**HUMANEVAL, **change}
    record = {k: v for k, v in record.items() if v is not None}
    with pytest.raises(ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        CodeRecord.model_validate(record)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"test_list": []}, "test_list"),
        ({"test_list": ["   "]}, "test_list\\[0\\]: must not be blank"),
        ({"test_list": ["assert 1 == 1"], "code": None}, "calls no function"),
        ({"text": None}, "text: Field required"),
        ({"test_list": ["assert f(1)"] * 1001}, "test_list"),
    ],
)
def test_a_bad_mbpp_record_names_the_field(change: dict[str, Any], message: str) -> None:
    record = {**MBPP, **change}
    record = {k: v for k, v in record.items() if v is not None}
    with pytest.raises(ValidationError, match=message):
        CodeRecord.model_validate(record)


def test_the_upload_bounds_fit_within_the_sandboxs_own() -> None:
    # datasets cannot import the sandbox (one layer): its bounds are its own, and fit.
    from evald_server.datasets import MAX_CODE_TESTS, MAX_TEST_CHARS
    from evald_server.sandbox import MAX_TEST_BYTES, MAX_TESTS

    assert MAX_CODE_TESTS <= MAX_TESTS
    assert MAX_TEST_CHARS * 4 <= MAX_TEST_BYTES  # 4 bytes a character at most in UTF-8
