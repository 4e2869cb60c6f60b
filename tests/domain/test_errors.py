"""One error classification: the reason → code table decides the exception class."""

import pytest

from evald_server.datasets import parse_jsonl
from evald_server.domain import (
    DatasetInvalid,
    ErrorCategory,
    ErrorReason,
    EvaldError,
    FieldViolation,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    TaskType,
    field_error,
    mapping_for,
    request_error,
)


@pytest.mark.parametrize("reason", list(ErrorReason))
def test_the_class_of_a_request_error_follows_the_table(reason: ErrorReason) -> None:
    error = request_error(reason, "m")
    mapping = mapping_for(reason)
    assert error.reason is reason
    assert type(error).grpc_code in (mapping.grpc_code, None)
    if type(error).grpc_code is None:  # only codes no client error class stands for
        assert mapping.grpc_code in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL")
    dataset_argument = (
        mapping.category is ErrorCategory.DATASET_INVALID
        and mapping.grpc_code == "INVALID_ARGUMENT"
    )
    assert isinstance(error, DatasetInvalid) is dataset_argument


@pytest.mark.parametrize(
    ("cls", "reason"),
    [
        (DatasetInvalid, ErrorReason.DATASET_TOO_LARGE),  # RESOURCE_EXHAUSTED
        (InvalidArgument, ErrorReason.RUN_NOT_FOUND),  # NOT_FOUND
        (NotFound, ErrorReason.INVALID_ARGUMENT),
    ],
)
def test_a_class_refuses_a_reason_of_another_code(
    cls: type[EvaldError], reason: ErrorReason
) -> None:
    with pytest.raises(TypeError, match=reason.name):
        cls(reason, "m")


def test_an_oversize_record_is_resource_exhausted() -> None:
    with pytest.raises(ResourceExhausted) as refused:
        parse_jsonl(
            TaskType.QA,
            [b'{"id": "a", "question": "q", "answers": ["x"]}\n'],
            max_records=10,
            max_record_bytes=8,
        )
    assert refused.value.reason is ErrorReason.DATASET_TOO_LARGE
    assert refused.value.metadata["limit"] == "max_record_bytes"


def test_a_field_error_names_its_field_twice() -> None:
    error = field_error("page_size", "must not be negative")
    assert isinstance(error, InvalidArgument)
    assert error.message == "page_size must not be negative"
    assert error.metadata == {"field": "page_size"}
    assert error.field_violations == (FieldViolation("page_size", "must not be negative"),)
    token = field_error("page_token", "invalid", "bad token", reason=ErrorReason.PAGE_TOKEN_INVALID)
    assert token.reason is ErrorReason.PAGE_TOKEN_INVALID
    assert token.message == "bad token"


def test_field_paths_are_rewritten_everywhere_the_error_names_them() -> None:
    error = request_error(
        ErrorReason.DATASET_HEADER_INVALID,
        "m",
        metadata={"field": "name", "line": 3},
        field_violations=(FieldViolation("name", "bad"), FieldViolation("prompt.x", "worse")),
    )
    error.with_field_paths(lambda f: f"header.{f}")
    assert error.metadata == {"field": "header.name", "line": "3"}
    assert [v.field for v in error.field_violations] == ["header.name", "header.prompt.x"]
