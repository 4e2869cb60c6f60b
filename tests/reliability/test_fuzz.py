"""Property tests: the dataset parser, the prompt renderer, and uploads through the RPC.

(tests/datasets/test_fuzz.py holds the parser's and renderer's basic properties; these
add chunking invariance, template-injection safety, and the server's answer to any
upload body: OK, INVALID_ARGUMENT or RESOURCE_EXHAUSTED, never INTERNAL.)
"""

import itertools
import json
import keyword
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evald.v1 import dataset_pb2, enums_pb2, service_pb2, service_pb2_grpc
from evald_server.datasets import (
    choice_key,
    colliding_choices,
    letter_choices,
    parse_jsonl,
    render_prompt,
    validate_template,
)
from evald_server.domain import EvaldError, TaskType
from tests._shared import status_of
from tests.harness import ServerProcess
from tests.reliability._support import release, server_config

MAX_RECORDS = 20
MAX_RECORD_BYTES = 400

text = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
nonempty = text.filter(lambda s: s.strip() != "")  # the schemas refuse blank text
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text


def _valid_records(task_type: TaskType) -> st.SearchStrategy[dict[str, Any]]:
    ids = st.one_of(st.none(), st.integers(0, 50), text)

    def with_id(record: dict[str, Any], record_id: Any) -> dict[str, Any]:
        return record if record_id is None else {"id": record_id, **record}

    if task_type is TaskType.CLASSIFICATION:
        base = st.builds(
            lambda i, choices, pick: {
                "input": i,
                "label": choices[pick % len(choices)],
                "choices": choices,
            },
            nonempty,
            st.lists(nonempty, min_size=2, max_size=4, unique=True),
            st.integers(0, 3),
        )
    elif task_type is TaskType.QA:
        base = st.builds(
            lambda q, c, a: {"question": q, "context": c, "answers": a},
            nonempty,
            text,
            st.lists(nonempty, min_size=1, max_size=3),
        )
    elif task_type is TaskType.NER:
        base = st.builds(
            lambda tokens: {"tokens": tokens, "tags": ["O"] * len(tokens)},
            st.lists(nonempty, min_size=1, max_size=5),
        )
    elif task_type is TaskType.SUMMARIZATION:
        base = st.builds(lambda d, s: {"document": d, "summary": s}, nonempty, nonempty)
    elif task_type is TaskType.MULTIPLE_CHOICE:
        base = st.builds(
            lambda q, choices, pick: {
                "question": q,
                "choices": choices,
                "answer_index": pick % len(choices),
            },
            nonempty,
            # Valid: an answer can tell the choices apart (the upload refuses others).
            st.lists(nonempty, min_size=2, max_size=5, unique_by=choice_key).filter(
                lambda choices: not colliding_choices(choices) and not letter_choices(choices)
            ),
            st.integers(0, 4),
        )
    elif task_type is TaskType.CODE:
        identifier = st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True).filter(
            lambda name: not keyword.iskeyword(name)
        )
        base = st.one_of(
            st.builds(  # HumanEval's shape
                lambda p, name: {
                    "prompt": f'def {name}():\n    """{p}"""\n',
                    "test": "def check(candidate):\n    assert candidate() is None\n",
                    "entry_point": name,
                },
                nonempty,
                identifier,
            ),
            st.builds(  # MBPP's shape
                lambda t, name: {"text": t, "test_list": [f"assert {name}() == 1"]},
                nonempty,
                identifier,
            ),
        )
    elif task_type is TaskType.TOOL_CALL:
        base = st.builds(
            lambda i, city, choice: {
                "input": i,
                "tools": [_WEATHER],
                "expected_calls": [{"name": "get_weather", "arguments": {"city": city}}],
                "tool_choice": choice,
            },
            nonempty,
            text,
            st.sampled_from(["auto", "required", "none"]),
        )
    elif task_type is TaskType.STRUCTURED_OUTPUT:
        base = st.builds(
            lambda i, name: {"input": i, "json_schema": _PERSON, "reference": {"name": name}},
            nonempty,
            text,
        )
    else:
        base = st.builds(lambda i, r: {"input": i, "reference": r}, nonempty, nonempty)
    return st.builds(with_id, base, ids)


_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
_PERSON = {"type": "object", "properties": {"name": {"type": "string"}}}


def _mutated(record: dict[str, Any], key: str | None, value: Any) -> dict[str, Any]:
    """A record with one field dropped (value None) or replaced (a stray type)."""
    if key is None:
        return record
    changed = dict(record)
    if value is None:
        changed.pop(key, None)
    else:
        changed[key] = value
    return changed


@st.composite
def bodies(draw: st.DrawFn, task_type: TaskType) -> bytes:
    """JSONL mixing valid records, mutated ones, stray JSON and raw bytes."""
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["valid", "valid", "mutated", "json", "bytes", "blank"]))
        if kind in ("valid", "mutated"):
            record = draw(_valid_records(task_type))
            if kind == "mutated":
                key = draw(st.sampled_from([None, *record, "extra"]))
                record = _mutated(record, key, draw(st.none() | json_scalars))
            lines.append(json.dumps(record).encode())
        elif kind == "json":
            lines.append(json.dumps(draw(json_scalars | st.lists(json_scalars))).encode())
        elif kind == "bytes":
            lines.append(draw(st.binary(max_size=60)))
        else:
            lines.append(b"  ")
    return b"\n".join(lines) + draw(st.sampled_from([b"", b"\n"]))


def _outcome(task_type: TaskType, chunks: list[bytes]) -> tuple[Any, ...]:
    try:
        parsed = parse_jsonl(
            task_type, chunks, max_records=MAX_RECORDS, max_record_bytes=MAX_RECORD_BYTES
        )
    except EvaldError as error:  # DatasetInvalid, or ResourceExhausted past a limit
        return ("invalid", error.reason, error.message, dict(error.metadata))
    records = [(r.record_id, r.line, r.fields) for r in parsed.records]
    return ("ok", records, parsed.content_sha256)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in itertools.pairwise([0, *points, len(data)])]


@settings(max_examples=200, deadline=None)
@given(data=st.data(), task_type=st.sampled_from(list(TaskType)))
def test_parser_outcome_does_not_depend_on_chunking(
    data: st.DataObject, task_type: TaskType
) -> None:
    body = data.draw(bodies(task_type))
    cuts = data.draw(st.lists(st.integers(0, 10_000), max_size=6))
    whole = _outcome(task_type, [body])
    assert _outcome(task_type, _split(body, cuts)) == whole
    if whole[0] == "invalid":
        assert whole[2].startswith("line ") or whole[1].value == "dataset_empty"


_SINGLE_FIELD = {
    TaskType.GENERATION: ("input", {"reference": "r"}),
    TaskType.SUMMARIZATION: ("document", {"summary": "s"}),
    TaskType.NER: ("text", {"entities": []}),
}


@st.composite
def templates(draw: st.DrawFn, placeholder: str) -> tuple[str, list[str | None]]:
    """A template of literal text (braces escaped) and placeholders; its parts in order
    (None where the placeholder's value goes)."""
    parts: list[str | None] = draw(
        st.lists(st.one_of(text, st.just(None)), min_size=1, max_size=6).filter(
            lambda p: None in p  # a template without a placeholder is refused
        )
    )
    source = "".join(
        "{" + placeholder + "}" if p is None else p.replace("{", "{{").replace("}", "}}")
        for p in parts
    )
    return source, parts


@settings(max_examples=300, deadline=None)
@given(data=st.data(), task_type=st.sampled_from(list(_SINGLE_FIELD)))
def test_templates_render_literally_and_values_are_never_templates(
    data: st.DataObject, task_type: TaskType
) -> None:
    field, rest = _SINGLE_FIELD[task_type]
    source, parts = data.draw(templates(field))
    # Values that look like templates must come out verbatim, not be expanded.
    value = data.draw(st.one_of(nonempty, st.sampled_from(["{input}", "{{", "}", "{text}{"])))
    validate_template(task_type, source)
    (message,) = render_prompt(task_type, {field: value, **rest}, source)
    assert message.content == "".join(value if p is None else p for p in parts)


@settings(max_examples=200, deadline=None)
@given(task_type=st.sampled_from(list(TaskType)), data=st.data())
def test_every_valid_record_renders_a_user_message(
    task_type: TaskType, data: st.DataObject
) -> None:
    record = data.draw(_valid_records(task_type))
    parsed = parse_jsonl(
        task_type, [json.dumps(record).encode()], max_records=1, max_record_bytes=10_000
    )
    (message,) = render_prompt(task_type, parsed.records[0].fields)
    assert message.role == "user"
    assert isinstance(message.content, str)
    assert message.content.strip()  # the schemas refuse blank text


# -- through the RPC --------------------------------------------------------------------------

_TASK_TYPES = {
    TaskType.CLASSIFICATION: enums_pb2.TASK_TYPE_CLASSIFICATION,
    TaskType.QA: enums_pb2.TASK_TYPE_QA,
    TaskType.NER: enums_pb2.TASK_TYPE_NER,
    TaskType.SUMMARIZATION: enums_pb2.TASK_TYPE_SUMMARIZATION,
    TaskType.GENERATION: enums_pb2.TASK_TYPE_GENERATION,
    TaskType.MULTIPLE_CHOICE: enums_pb2.TASK_TYPE_MULTIPLE_CHOICE,
    TaskType.CODE: enums_pb2.TASK_TYPE_CODE,
    TaskType.TOOL_CALL: enums_pb2.TASK_TYPE_TOOL_CALL,
    TaskType.STRUCTURED_OUTPUT: enums_pb2.TASK_TYPE_STRUCTURED_OUTPUT,
}
_ANSWERS = {"OK", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"}
_names = itertools.count()


@pytest.fixture(scope="module")
def stub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One server process for every example (a blocking stub: hypothesis runs sync)."""
    tmp_path: Path = tmp_path_factory.mktemp("fuzz")
    config = server_config(
        tmp_path,
        [{"id": "sim", "provider": "simulated"}],
        limits={"max_records_per_dataset": MAX_RECORDS, "max_record_bytes": MAX_RECORD_BYTES},
    )
    server = ServerProcess(config)
    try:
        address = server.start()
        with grpc.insecure_channel(address) as channel:
            yield service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
    finally:
        server.kill()
        release(server)
    assert "unexpected error" not in server.stderr(), server.stderr()


def _upload(stub: Any, task_type: TaskType, chunks: list[bytes]) -> tuple[str, str]:
    header = dataset_pb2.UploadDatasetHeader(
        name=f"fuzz-{next(_names)}", benchmark_version="1.0.0", task_type=_TASK_TYPES[task_type]
    )
    messages = [service_pb2.UploadDatasetRequest(header=header)]
    messages += [service_pb2.UploadDatasetRequest(chunk=c) for c in chunks]
    try:
        stub.UploadDataset(iter(messages), timeout=30)
    except grpc.RpcError as error:
        return status_of(error)
    return "OK", ""


def _check_upload(stub: Any, task_type: TaskType, data: st.DataObject) -> None:
    body = data.draw(st.one_of(bodies(task_type), st.binary(max_size=2000)))
    chunks = _split(body, data.draw(st.lists(st.integers(0, 10_000), max_size=4)))
    code, reason = _upload(stub, task_type, chunks)
    assert code in _ANSWERS, (code, reason)
    expected = _outcome(task_type, [body])
    if code == "OK":
        assert expected[0] == "ok"
    else:
        assert expected[0] == "invalid"
        assert reason == expected[1].name


_FIXTURE_OK = [HealthCheck.function_scoped_fixture]


@settings(max_examples=80, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(task_type=st.sampled_from(list(TaskType)), data=st.data())
def test_random_upload_bodies_are_accepted_or_rejected_never_internal(
    stub: Any, task_type: TaskType, data: st.DataObject
) -> None:
    _check_upload(stub, task_type, data)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=_FIXTURE_OK)
@given(task_type=st.sampled_from(list(TaskType)), data=st.data())
def test_many_more_random_upload_bodies(
    stub: Any, task_type: TaskType, data: st.DataObject
) -> None:
    _check_upload(stub, task_type, data)
