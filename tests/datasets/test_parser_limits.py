"""The record size and count limits at their boundaries, however the bytes are chunked."""

import json
from collections.abc import Iterator

import pytest

from evald_server.datasets import parse_jsonl
from evald_server.domain import ErrorReason, ResourceExhausted, TaskType

LIMIT = 200


def record(size: int, label: str = "a") -> bytes:
    """A classification record of exactly ``size`` bytes (without its newline)."""
    empty = json.dumps({"input": "", "label": label}).encode()
    line = json.dumps({"input": "x" * (size - len(empty)), "label": label}).encode()
    assert len(line) == size
    return line


def parse(chunks: list[bytes], *, max_records: int = 10) -> object:
    return parse_jsonl(
        TaskType.CLASSIFICATION, chunks, max_records=max_records, max_record_bytes=LIMIT
    )


def too_large(chunks: list[bytes]) -> ResourceExhausted:
    with pytest.raises(ResourceExhausted) as caught:
        parse(chunks)
    assert caught.value.reason is ErrorReason.DATASET_TOO_LARGE
    assert caught.value.metadata["limit"] == "max_record_bytes"
    assert caught.value.metadata["limitValue"] == str(LIMIT)
    return caught.value


def test_a_line_over_the_limit_arriving_whole_inside_one_chunk() -> None:
    chunk = record(50) + b"\n" + record(LIMIT + 1) + b"\n" + record(50) + b"\n"
    error = too_large([chunk])
    assert error.metadata["line"] == "2"
    assert error.message == f"line 2: line is longer than {LIMIT} bytes (limit max_record_bytes)"


@pytest.mark.parametrize("newline", [True, False])
def test_a_line_of_exactly_the_limit_is_accepted_one_more_byte_is_not(newline: bool) -> None:
    end = b"\n" if newline else b""
    parsed = parse([record(50) + b"\n" + record(LIMIT) + end])
    assert len(parsed.records) == 2  # type: ignore[attr-defined]
    error = too_large([record(50) + b"\n" + record(LIMIT + 1) + end])
    assert error.metadata["line"] == "2"


def test_a_line_over_the_limit_is_refused_before_its_newline_arrives() -> None:
    line = record(LIMIT + 50)
    consumed: list[int] = []

    def chunks() -> Iterator[bytes]:
        yield record(30) + b"\n"
        for start in range(0, len(line), 40):
            consumed.append(start)
            yield line[start : start + 40]
        raise AssertionError("the parser read past the oversize line")

    with pytest.raises(ResourceExhausted) as caught:
        parse_jsonl(TaskType.CLASSIFICATION, chunks(), max_records=10, max_record_bytes=LIMIT)
    assert caught.value.metadata["line"] == "2"
    # Stopped as soon as more than LIMIT bytes were pending, not at the end of the line.
    assert len(consumed) == LIMIT // 40 + 1


def test_pending_bytes_at_the_limit_are_not_refused_yet() -> None:
    line = record(LIMIT)
    parsed = parse([line[:LIMIT], b"\n"])  # LIMIT bytes pending, then the newline
    assert len(parsed.records) == 1  # type: ignore[attr-defined]


def test_exactly_max_records_is_accepted_and_blank_lines_do_not_count() -> None:
    body = b"\n\n".join(record(40) for _ in range(3)) + b"\n\n"
    assert len(parse([body], max_records=3).records) == 3  # type: ignore[attr-defined]
    with pytest.raises(ResourceExhausted) as caught:
        parse([body + record(40)], max_records=3)
    assert caught.value.reason is ErrorReason.DATASET_TOO_LARGE
    assert caught.value.metadata["line"] == "7"
