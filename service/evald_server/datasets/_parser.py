"""JSONL upload → validated records, all or nothing.

The first bad line fails the whole upload with ``DatasetInvalid`` (a size limit with
``ResourceExhausted``), whose message and metadata name the line and the field;
nothing is returned half-way. Once every line is a valid record, multiple-choice records
whose choices an answer could not tell apart (``colliding_choices``,
``letter_choices``) fail the upload together: one field violation per such record (the first
``MAX_REPORTED_RECORDS``), the message counting them all. The content hash
is taken over the canonical JSON of the validated records (sorted keys, no
whitespace), so re-serialising the same records does not make a "different" version.
"""

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from evald_server.datasets import _strict_json
from evald_server.datasets._choices import (
    choice_key,
    choice_letter,
    colliding_choices,
    letter_choices,
)
from evald_server.datasets._records import RECORD_MODELS
from evald_server.domain import (
    DatasetInvalid,
    ErrorReason,
    EvaldError,
    FieldViolation,
    TaskType,
    request_error,
)

# Records named one by one in an upload error (the message counts every one).
MAX_REPORTED_RECORDS = 20


@dataclass(frozen=True, slots=True)
class DatasetRecord:
    """One validated record: its id, the line it came from, its normalised fields."""

    record_id: str
    line: int
    fields: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ParsedDataset:
    records: tuple[DatasetRecord, ...]
    content_sha256: str


def parse_jsonl(
    task_type: TaskType,
    chunks: Iterable[bytes],
    *,
    max_records: int,
    max_record_bytes: int,
) -> ParsedDataset:
    """Validate a JSONL stream of ``task_type`` records.

    Raises ``DatasetInvalid`` on the first bad one.
    """
    model = RECORD_MODELS[task_type]
    digest = hashlib.sha256()
    records: list[DatasetRecord] = []
    first_line_of_id: dict[str, int] = {}
    decoder = _strict_json.StrictDecoder()
    # Records whose choices an answer cannot tell apart: how many, and the first ones'
    # (line, violation).
    ambiguous = 0
    shown: list[tuple[int, FieldViolation]] = []
    for line_number, raw in _lines(chunks, max_record_bytes):
        if not raw.strip():
            continue
        if len(records) >= max_records:
            raise _invalid(
                ErrorReason.DATASET_TOO_LARGE,
                line_number,
                None,
                f"more than {max_records} records (limit max_records_per_dataset)",
                limit="max_records_per_dataset",
                limitValue=max_records,
            )
        document = _decode(raw, line_number, decoder)
        try:
            validated = model.model_validate(document)
        except ValidationError as exc:
            raise _from_validation(exc, line_number) from exc
        fields = validated.model_dump(mode="json", exclude_none=True)
        given_id = fields.pop("id", None)
        record_id = str(line_number if given_id is None else given_id)
        if record_id in first_line_of_id:
            first = first_line_of_id[record_id]
            problem = (
                f"id {record_id!r} already used on line {first}"
                if given_id is not None
                else f"the line has no id, so its id is its line number, {record_id!r}, "
                f"which line {first} already uses as its id"
            )
            raise _invalid(
                ErrorReason.DATASET_DUPLICATE_ID, line_number, "id", problem, firstLine=first
            )
        first_line_of_id[record_id] = line_number
        if task_type is TaskType.MULTIPLE_CHOICE:
            violation = _colliding(fields["choices"], line_number, record_id)
            if violation is not None:
                ambiguous += 1
                if len(shown) < MAX_REPORTED_RECORDS:
                    shown.append((line_number, violation))
        canonical = json.dumps(
            {"id": record_id, **fields}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
        digest.update(canonical.encode("utf-8"))
        digest.update(b"\n")
        records.append(DatasetRecord(record_id=record_id, line=line_number, fields=fields))
    if not records:
        raise DatasetInvalid(ErrorReason.DATASET_EMPTY, "the dataset has no records")
    if ambiguous:
        raise _ambiguous_choices(shown, ambiguous)
    return ParsedDataset(records=tuple(records), content_sha256=digest.hexdigest())


def _colliding(choices: list[str], line: int, record_id: str) -> FieldViolation | None:
    """A violation naming the record when an answer could not tell some of its choices
    apart: choices that read the same, or a choice whose text is another's letter."""
    problems = [
        " and ".join(f"{choice_letter(i)} {choices[i]!r}" for i in group)
        + f" read the same ({choice_key(choices[group[0]])!r})"
        for group in colliding_choices(choices)
    ] + [
        f"{choice_letter(i)} {choices[i]!r} is the letter of choice {choice_letter(named)}"
        for i, named in letter_choices(choices)
    ]
    if not problems:
        return None
    description = (
        f"record {record_id!r}: choices {'; '.join(problems)} (case, spacing and framing "
        "punctuation ignored): an answer could not tell them apart"
    )
    return FieldViolation(field=f"records[line {line}].choices", description=description)


def _ambiguous_choices(shown: list[tuple[int, FieldViolation]], count: int) -> EvaldError:
    more = f" and {count - len(shown)} more" if count > len(shown) else ""
    lines = ", ".join(f"line {line}" for line, _ in shown)
    first_line, first = shown[0]
    return request_error(
        ErrorReason.DATASET_FIELD_INVALID,
        f"line {first_line}, field 'choices': {first.description}; {count} record(s) have "
        f"choices an answer could not tell apart ({lines}{more})",
        metadata={"line": first_line, "field": "choices", "records": count},
        field_violations=tuple(violation for _, violation in shown),
    )


def _lines(chunks: Iterable[bytes], max_record_bytes: int) -> Iterator[tuple[int, bytes]]:
    """Split a chunked byte stream into numbered lines, refusing any line over the limit."""
    pending = bytearray()
    line_number = 0
    for chunk in chunks:
        pending.extend(chunk)
        while (end := pending.find(b"\n")) >= 0:
            line_number += 1
            line = bytes(pending[:end])
            del pending[: end + 1]
            _check_size(line, line_number, max_record_bytes)
            yield line_number, line
        if len(pending) > max_record_bytes:
            _check_size(bytes(pending), line_number + 1, max_record_bytes)
    if pending:
        line_number += 1
        _check_size(bytes(pending), line_number, max_record_bytes)
        yield line_number, bytes(pending)


def _check_size(line: bytes, line_number: int, max_record_bytes: int) -> None:
    if len(line) > max_record_bytes:
        raise _invalid(
            ErrorReason.DATASET_TOO_LARGE,
            line_number,
            None,
            f"line is longer than {max_record_bytes} bytes (limit max_record_bytes)",
            limit="max_record_bytes",
            limitValue=max_record_bytes,
        )


def _decode(raw: bytes, line_number: int, decoder: _strict_json.StrictDecoder) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid(
            ErrorReason.DATASET_ENCODING_ERROR,
            line_number,
            None,
            f"not valid UTF-8 at byte {exc.start}",
        ) from exc
    try:
        document, suspect = decoder.decode(raw, text.removeprefix("\ufeff"))
    except (json.JSONDecodeError, ValueError, RecursionError) as exc:
        detail = (
            exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc) or "too deeply nested"
        )
        column = f" (column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise _invalid(
            ErrorReason.DATASET_PARSE_ERROR, line_number, None, f"invalid JSON{column}: {detail}"
        ) from exc
    if not isinstance(document, dict):
        raise _invalid(
            ErrorReason.DATASET_PARSE_ERROR,
            line_number,
            None,
            f"expected a JSON object, got {type(document).__name__}",
        )
    problem = _strict_json.problem(document) if suspect else None
    if problem is not None:
        raise _invalid(problem.reason, line_number, problem.path or None, problem.message)
    return document


def _from_validation(exc: ValidationError, line_number: int) -> EvaldError:
    error = exc.errors(include_url=False)[0]
    location = ".".join(str(part) for part in error["loc"] if not _is_type_tag(part))
    message = error["msg"].removeprefix("Value error, ")
    if not location and ": " in message:
        # Model-level validators name their field as "field: message".
        location, message = message.split(": ", 1)
    kind = error["type"]
    if kind == "missing" or message.startswith("Field required"):
        reason = ErrorReason.DATASET_FIELD_MISSING
        # A validator may add an alternative: "Field required (or answer_letter)".
        message = "field is required" + message.removeprefix("Field required")
    elif kind == "extra_forbidden":
        reason = ErrorReason.DATASET_FIELD_INVALID
        message = "unknown field"
    else:
        reason = ErrorReason.DATASET_FIELD_INVALID
    return _invalid(reason, line_number, location or None, message)


def _is_type_tag(part: object) -> bool:
    """Pydantic puts the union member's type into an error location (``id.str``); drop it."""
    return isinstance(part, str) and (part in _TYPE_TAGS or "[" in part)


_TYPE_TAGS = frozenset({"str", "int", "float", "bool", "list", "dict", "none", "constrained-str"})


def _invalid(
    reason: ErrorReason, line: int, field: str | None, problem: str, **extra: object
) -> EvaldError:
    where = f"line {line}" + (f", field {field!r}" if field else "")
    metadata: dict[str, object] = {"line": line, **extra}
    violations: tuple[FieldViolation, ...] = ()
    if field:
        metadata["field"] = field
        violations = (FieldViolation(field=f"records[line {line}].{field}", description=problem),)
    return request_error(
        reason, f"{where}: {problem}", metadata=metadata, field_violations=violations
    )
