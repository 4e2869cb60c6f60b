"""Malformed uploads through UploadDataset: each fails with its gRPC code, ErrorInfo
reason, line and field, and leaves nothing stored; re-uploads of a version are
idempotent for the same content and a conflict for other content."""

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from evald.v1 import enums_pb2, service_pb2
from evald_client import AsyncEvaldClient, DatasetInvalid
from tests._shared import classification_records, jsonl
from tests.api._support import assert_reason, chunk, fails, header, raw_stub
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

MAX_RECORDS = 20
MAX_RECORD_BYTES = 512

CLS = enums_pb2.TASK_TYPE_CLASSIFICATION
QA = enums_pb2.TASK_TYPE_QA
NER = enums_pb2.TASK_TYPE_NER
GEN = enums_pb2.TASK_TYPE_GENERATION
MC = enums_pb2.TASK_TYPE_MULTIPLE_CHOICE
INVALID = grpc.StatusCode.INVALID_ARGUMENT

GOOD_CLS = b'{"input": "is 2 even?", "label": "yes"}\n'
GOOD_QA = b'{"question": "Who?", "answers": ["me"]}\n'
GOOD_MC = (
    '{"question": "2 - 4?", "choices": ["\u22124", "\u22122", "10", "2"], "answer_index": 1}\n'
)


@pytest.fixture(scope="module")
async def address(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    limits = {"max_records_per_dataset": MAX_RECORDS, "max_record_bytes": MAX_RECORD_BYTES}
    config = make_config(tmp_path_factory.mktemp("uploads"), limits=limits)
    async with running_server(config) as bound:
        yield bound


def pieces(data: bytes, size: int = 7) -> list[service_pb2.UploadDatasetRequest]:
    """``data`` as chunks that split lines (and UTF-8 sequences) anywhere."""
    return [chunk(data[i : i + size]) for i in range(0, len(data), size)]


Messages = Callable[[str], list[service_pb2.UploadDatasetRequest]]


def records(task_type: enums_pb2.TaskType, body: bytes) -> Messages:
    return lambda name: [header(name, task_type=task_type), *pieces(body)]


@dataclass(frozen=True)
class Bad:
    messages: Messages
    reason: str
    line: int | None = None
    field: str | None = None  # ErrorInfo metadata "field"
    violation: str | None = None  # a BadRequest field violation that must be present
    code: grpc.StatusCode = INVALID
    metadata: tuple[tuple[str, str], ...] = ()


def _record_field(line: int, field: str, reason: str = "DATASET_FIELD_INVALID") -> dict[str, Any]:
    return {
        "reason": reason,
        "line": line,
        "field": field,
        "violation": f"records[line {line}].{field}",
    }


BAD_UPLOADS: dict[str, Bad] = {
    "bad_json": Bad(
        records(CLS, GOOD_CLS + b'{"input": "b", "label": \n'), "DATASET_PARSE_ERROR", line=2
    ),
    "not_an_object": Bad(records(CLS, b'["input", "label"]\n'), "DATASET_PARSE_ERROR", line=1),
    "nan_constant": Bad(
        records(CLS, b'{"input": "a", "label": "x", "metadata": {"w": NaN}}\n'),
        "DATASET_PARSE_ERROR",
        line=1,
    ),
    "wrong_field_type": Bad(
        records(CLS, GOOD_CLS + b'{"input": 5, "label": "x"}\n'), **_record_field(2, "input")
    ),
    "missing_field": Bad(
        records(QA, GOOD_QA + GOOD_QA + b'{"question": "q"}\n'),
        **_record_field(3, "answers", "DATASET_FIELD_MISSING"),
    ),
    "unknown_field": Bad(
        records(CLS, b'{"input": "a", "label": "x", "lable": "x"}\n'),
        **_record_field(1, "lable"),
    ),
    "invalid_utf8": Bad(
        records(
            CLS, GOOD_CLS + GOOD_CLS.replace(b"2", b"3") + b'{"input": "caf\xe9", "label": "x"}'
        ),
        "DATASET_ENCODING_ERROR",
        line=3,
    ),
    "line_over_max_record_bytes": Bad(
        records(CLS, GOOD_CLS + jsonl([{"input": "x" * MAX_RECORD_BYTES, "label": "y"}])),
        "DATASET_TOO_LARGE",
        line=2,
        code=grpc.StatusCode.RESOURCE_EXHAUSTED,
        metadata=(("limit", "max_record_bytes"), ("limitValue", str(MAX_RECORD_BYTES))),
    ),
    "more_records_than_max_records_per_dataset": Bad(
        records(CLS, jsonl(classification_records(MAX_RECORDS + 1))),
        "DATASET_TOO_LARGE",
        line=MAX_RECORDS + 1,
        code=grpc.StatusCode.RESOURCE_EXHAUSTED,
        metadata=(("limit", "max_records_per_dataset"), ("limitValue", str(MAX_RECORDS))),
    ),
    "duplicate_id": Bad(
        records(CLS, jsonl([{"id": i, "input": "a", "label": "b"} for i in ("a", "b", "a")])),
        **_record_field(3, "id", "DATASET_DUPLICATE_ID"),
        metadata=(("firstLine", "1"),),
    ),
    "duplicate_implicit_id": Bad(
        # Without an id a record's id is its line number: an explicit "2" collides.
        records(CLS, GOOD_CLS + GOOD_CLS + jsonl([{"id": "2", "input": "a", "label": "b"}])),
        **_record_field(3, "id", "DATASET_DUPLICATE_ID"),
    ),
    "label_not_in_choices": Bad(
        records(CLS, b'{"input": "a", "label": "maybe", "choices": ["yes", "no"]}\n'),
        **_record_field(1, "label"),
    ),
    "empty_answers": Bad(
        records(QA, GOOD_QA + b'{"question": "Who?", "answers": []}\n'),
        **_record_field(2, "answers"),
    ),
    "bio_length_mismatch": Bad(
        records(NER, b'{"tokens": ["Ada", "Lovelace", "wrote"], "tags": ["B-PER", "I-PER"]}\n'),
        **_record_field(1, "tags"),
    ),
    "bio_tag_invalid": Bad(
        records(NER, b'{"tokens": ["Ada", "wrote"], "tags": ["X-PER", "O"]}\n'),
        **_record_field(1, "tags[0]"),
    ),
    "entity_not_in_text": Bad(
        records(NER, b'{"text": "Ada wrote", "entities": [{"text": "Bob", "type": "PER"}]}\n'),
        **_record_field(1, "entities[0].text"),
    ),
    "invalid_regex_reference": Bad(
        records(GEN, b'{"input": "a", "reference": "([a-z", "match": "regex"}\n'),
        **_record_field(1, "reference"),
    ),
    "numeric_reference_without_number": Bad(
        records(GEN, b'{"input": "a", "reference": "none", "match": "numeric"}\n'),
        **_record_field(1, "reference"),
    ),
    "unknown_match_mode": Bad(
        records(GEN, b'{"input": "a", "reference": "b", "match": "fuzzy"}\n'),
        **_record_field(1, "match"),
    ),
    "choices_that_read_the_same": Bad(
        records(
            MC,
            (
                GOOD_MC
                + '{"question": "q", "choices": ["\u22122", "-2", "2"], "answer_index": 0}\n'
            ).encode(),
        ),
        **_record_field(2, "choices"),
    ),
    "empty_upload": Bad(records(CLS, b""), "DATASET_EMPTY"),
    "blank_lines_only": Bad(records(CLS, b"\n  \n\n"), "DATASET_EMPTY"),
    "no_messages": Bad(
        lambda name: [], "DATASET_HEADER_INVALID", field="header", violation="header"
    ),
    "no_header": Bad(
        lambda name: pieces(GOOD_CLS), "DATASET_HEADER_INVALID", field="header", violation="header"
    ),
    "header_not_first": Bad(
        lambda name: [chunk(GOOD_CLS), header(name)],
        "DATASET_HEADER_INVALID",
        field="header",
        violation="header",
    ),
    "header_twice": Bad(
        lambda name: [header(name), chunk(GOOD_CLS), header(name)],
        "DATASET_HEADER_INVALID",
        field="header",
        violation="header",
    ),
    "unspecified_task_type": Bad(
        lambda name: [header(name, task_type=enums_pb2.TASK_TYPE_UNSPECIFIED), chunk(GOOD_CLS)],
        "DATASET_HEADER_INVALID",
        field="header.task_type",
        violation="header.task_type",
    ),
    "unknown_task_type_number": Bad(
        lambda name: [header(name, task_type=cast(enums_pb2.TaskType, 99)), chunk(GOOD_CLS)],
        "DATASET_HEADER_INVALID",
        field="header.task_type",
        violation="header.task_type",
    ),
    "invalid_name": Bad(
        lambda name: [header("not a name!"), chunk(GOOD_CLS)],
        "DATASET_HEADER_INVALID",
        violation="header.name",
    ),
    "invalid_version": Bad(
        lambda name: [header(name, version="v1"), chunk(GOOD_CLS)],
        "DATASET_HEADER_INVALID",
        violation="header.benchmark_version",
    ),
    "unknown_template_placeholder": Bad(
        lambda name: [header(name, prompt_template="Q: {input} A: {label}"), chunk(GOOD_CLS)],
        "DATASET_HEADER_INVALID",
        field="header.prompt_template",
        violation="header.prompt_template",
        metadata=(("placeholder", "label"),),
    ),
    "unmatched_template_brace": Bad(
        lambda name: [header(name, prompt_template="Q: {input"), chunk(GOOD_CLS)],
        "DATASET_HEADER_INVALID",
        field="header.prompt_template",
        violation="header.prompt_template",
    ),
}


async def _all_datasets(stub: Any) -> set[str]:
    response = await stub.ListDatasets(service_pb2.ListDatasetsRequest(page_size=1000))
    assert not response.next_page_token
    return {d.dataset_id for d in response.datasets}


@pytest.mark.parametrize("case", list(BAD_UPLOADS), ids=list(BAD_UPLOADS))
async def test_malformed_upload_is_refused_and_stores_nothing(address: str, case: str) -> None:
    bad = BAD_UPLOADS[case]
    name = case.replace("_", "-")
    async with raw_stub(address) as stub:
        before = await _all_datasets(stub)
        failure = await fails(stub.UploadDataset(iter(bad.messages(name))))
        assert_reason(failure, bad.code, bad.reason, **dict(bad.metadata))
        if bad.line is not None:
            assert failure.metadata.get("line") == str(bad.line), failure
            assert f"line {bad.line}" in failure.message
        else:
            assert "line" not in failure.metadata
        if bad.field is not None:
            assert failure.metadata.get("field") == bad.field, failure
        if bad.violation is not None:
            assert bad.violation in failure.violations, failure
        else:
            assert not failure.violations, "no field to blame, no BadRequest"
        # All or nothing: not even a part of the upload is stored.
        assert await _all_datasets(stub) == before
        missing = await fails(
            stub.GetDataset(
                service_pb2.GetDatasetRequest(ref={"name": name, "benchmark_version": "1.0.0"})
            )
        )
        assert missing.code is grpc.StatusCode.NOT_FOUND


async def test_sdk_reports_line_and_field_of_a_bad_file(address: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        jsonl(classification_records(4, prefix="c")) + b'{"input": "x", "label": ""}\n'
    )
    async with AsyncEvaldClient(address) as client:
        with pytest.raises(DatasetInvalid) as info:
            await client.upload_dataset(
                name="sdk-bad",
                version="1.0.0",
                task_type="classification",
                path=path,
                chunk_bytes=5,
            )
        error = info.value
        assert (error.code, error.reason) == ("INVALID_ARGUMENT", "DATASET_FIELD_INVALID")
        assert (error.metadata["line"], error.metadata["field"]) == ("5", "label")
        assert [v.field for v in error.field_violations] == ["records[line 5].label"]
        assert [d async for d in client.list_datasets(name="sdk-bad")] == []


async def test_every_record_with_choices_that_read_the_same_is_named(
    address: str, tmp_path: Path
) -> None:
    path = tmp_path / "colliding.jsonl"
    path.write_bytes(
        jsonl(
            [
                {"question": "a", "choices": ["2.5", "25", "-2.5"], "answer_index": 0},
                {"id": "q2", "question": "b", "choices": ["\u22122", "-2", "2"], "answer_index": 0},
                {"question": "c", "choices": ["5%", "5", "$5"], "answer_index": 1},
                {"question": "d", "choices": ["Paris", "paris.", "Lyon"], "answer_letter": "C"},
            ]
        )
    )
    async with AsyncEvaldClient(address) as client:
        with pytest.raises(DatasetInvalid) as info:
            await client.upload_dataset(
                name="colliding", version="1.0.0", task_type="multiple_choice", path=path
            )
        error = info.value
        assert (error.code, error.reason) == ("INVALID_ARGUMENT", "DATASET_FIELD_INVALID")
        assert [v.field for v in error.field_violations] == [
            "records[line 2].choices",
            "records[line 4].choices",
        ]
        assert "record 'q2': choices A '\u22122' and B '-2' read the same ('-2')" in (
            error.field_violations[0].description
        )
        assert "A 'Paris' and B 'paris.'" in error.field_violations[1].description
        assert (error.metadata["line"], error.metadata["records"]) == ("2", "2")
        assert "2 record(s) have choices an answer could not tell apart" in str(error)
        assert [d async for d in client.list_datasets(name="colliding")] == []


async def test_same_version_same_content_is_the_existing_dataset(address: str) -> None:
    body = jsonl(classification_records(6, prefix="c"))
    async with raw_stub(address) as stub:
        first = await stub.UploadDataset(iter([header("twice"), *pieces(body, 11)]))
        assert first.created
        # The same records, chunked differently and with other JSON spacing.
        respaced = body.replace(b": ", b":")
        again = await stub.UploadDataset(iter([header("twice"), *pieces(respaced, 3)]))
        assert not again.created
        assert again.dataset.dataset_id == first.dataset.dataset_id
        assert again.dataset.content_sha256 == first.dataset.content_sha256
        listed = await stub.ListDatasets(service_pb2.ListDatasetsRequest(name="twice"))
        assert [d.dataset_id for d in listed.datasets] == [first.dataset.dataset_id]

        other = jsonl(classification_records(7, prefix="c"))
        failure = await fails(stub.UploadDataset(iter([header("twice"), chunk(other)])))
        assert_reason(
            failure,
            grpc.StatusCode.ALREADY_EXISTS,
            "DATASET_VERSION_CONFLICT",
            name="twice",
            benchmarkVersion="1.0.0",
            existingSha256=first.dataset.content_sha256,
        )
        # Another prompt template over the same records is other content too.
        templated = header("twice", prompt_template="Say: {input}")
        failure = await fails(stub.UploadDataset(iter([templated, chunk(body)])))
        assert_reason(failure, grpc.StatusCode.ALREADY_EXISTS, "DATASET_VERSION_CONFLICT")
        # A new version of the name is a new dataset.
        newer = await stub.UploadDataset(iter([header("twice", version="1.1.0"), chunk(other)]))
        assert newer.created
        assert newer.dataset.record_count == 7
