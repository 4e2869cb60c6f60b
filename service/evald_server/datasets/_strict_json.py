"""Strict JSON for gold data: what ``json.loads`` lets through silently is refused.

``json.loads`` keeps the last of two equal keys, turns ``1e400`` into ``inf`` (stored as
null), accepts ``"\\ud800"`` (a lone surrogate that no UTF-8 writer can encode), and
nests as deep as the recursion limit allows (deeper than pydantic serialises). A
record must be unambiguous and storable, so each of these is a problem with the path
of the value it concerns (``metadata.tags[2]``).
"""

import json
from dataclasses import dataclass
from typing import Any

from evald_server.domain import ErrorReason

MAX_NESTING = 64  # objects and arrays inside a record, the record itself not counted


@dataclass(frozen=True, slots=True)
class JsonProblem:
    """What is wrong with a decoded document, and where (a path, empty for the root)."""

    reason: ErrorReason
    path: str
    message: str


@dataclass(frozen=True, slots=True)
class _DuplicateKey:
    """Stands in an object for a key that the object holds more than once."""

    name: str


@dataclass(frozen=True, slots=True)
class _Overflow:
    """Stands for a number literal that does not fit a double."""

    literal: str


def _pairs(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    document: dict[Any, Any] = {}
    for key, value in pairs:
        if key in document:
            document[_DuplicateKey(key)] = None
        else:
            document[key] = value
    return document


def _float(literal: str) -> float | _Overflow:
    value = float(literal)
    return value if value not in (float("inf"), float("-inf")) else _Overflow(literal)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str) -> Any:
    """``json.loads``, keeping what ``problem`` needs to see. Raises what it raises."""
    return json.loads(
        text, object_pairs_hook=_pairs, parse_float=_float, parse_constant=_reject_constant
    )


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def problem(document: Any) -> JsonProblem | None:
    """The first problem of a ``loads`` result in document order, None when it is clean.

    Iterative, so that depth alone cannot exhaust the stack."""
    stack: list[tuple[str, Any, int]] = [("", document, 0)]
    while stack:
        path, value, depth = stack.pop()
        if isinstance(value, str):
            if not _encodable(value):
                return JsonProblem(
                    ErrorReason.DATASET_ENCODING_ERROR,
                    path,
                    "the string holds a lone surrogate (an unpaired \\ud800-\\udfff escape), "
                    "which is not valid Unicode text",
                )
            continue
        if isinstance(value, _Overflow):
            return JsonProblem(
                ErrorReason.DATASET_FIELD_INVALID,
                path,
                f"the number {value.literal} does not fit a double (64-bit float)",
            )
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_NESTING:
            return JsonProblem(
                ErrorReason.DATASET_FIELD_INVALID,
                path,
                f"nested deeper than {MAX_NESTING} levels of objects and arrays",
            )
        children: list[tuple[str, Any, int]] = []
        if isinstance(value, list):
            children = [(_join(path, i), item, depth + 1) for i, item in enumerate(value)]
        else:
            for key, item in value.items():
                if isinstance(key, _DuplicateKey):
                    return JsonProblem(
                        ErrorReason.DATASET_PARSE_ERROR,
                        _join(path, key.name),
                        f"the key {key.name!r} appears twice in one object "
                        "(gold data must not be ambiguous)",
                    )
                if not _encodable(key):
                    return JsonProblem(
                        ErrorReason.DATASET_ENCODING_ERROR,
                        path or "(record)",
                        "an object key holds a lone surrogate (an unpaired \\ud800-\\udfff "
                        "escape), which is not valid Unicode text",
                    )
                children.append((_join(path, key), item, depth + 1))
        stack.extend(reversed(children))
    return None
