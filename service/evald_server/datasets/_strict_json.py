"""Strict JSON for gold data: what ``json.loads`` lets through silently is refused.

``json.loads`` keeps the last of two equal keys, turns ``1e400`` into ``inf`` (stored as
null), accepts ``"\\ud800"`` (a lone surrogate that no UTF-8 writer can encode), and
nests as deep as the recursion limit allows (deeper than pydantic serialises). A
record must be unambiguous and storable, so each of these is a problem with the path
of the value it concerns (``metadata.tags[2]``).
"""

import json
import math
import re
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


def _mark_duplicate(document: dict[Any, Any], pairs: list[tuple[str, Any]]) -> None:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            document[_DuplicateKey(key)] = None
            return
        seen.add(key)


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


# A lone surrogate can only come from a \\ud800-\\udfff escape in the line's bytes.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class StrictDecoder:
    """Decodes one upload's lines (one decoder per upload: it keeps per-line state) and
    says whether a line needs ``problem``: only a line with a duplicate key, a number
    beyond a double, a surrogate escape or more brackets than the nesting bound can
    have one, so the walk is skipped for the rest."""

    def __init__(self) -> None:
        self._suspect = False
        self._decoder = json.JSONDecoder(
            object_pairs_hook=self._pairs,
            parse_float=self._float,
            parse_constant=_reject_constant,
        )

    def _pairs(self, items: list[tuple[str, Any]]) -> dict[Any, Any]:
        document: dict[Any, Any] = dict(items)
        if len(document) != len(items):
            self._suspect = True
            _mark_duplicate(document, items)
        return document

    def _float(self, literal: str) -> float:
        value = float(literal)
        if math.isinf(value):
            self._suspect = True
        return value

    def decode(self, raw: bytes, text: str) -> tuple[Any, bool]:
        """The document of ``text`` (``raw``: its bytes), and whether it needs
        ``problem``. Raises what ``json.loads`` raises."""
        self._suspect = raw.count(b"{") + raw.count(b"[") > MAX_NESTING or (
            b"\\u" in raw and _SURROGATE_ESCAPE.search(raw) is not None
        )
        document = self._decoder.decode(text)
        return document, self._suspect


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
        if isinstance(value, float) and math.isinf(value):
            # NaN and Infinity literals are refused while parsing: an infinity here was
            # a finite literal too large for a double.
            return JsonProblem(
                ErrorReason.DATASET_FIELD_INVALID,
                path,
                "the number does not fit a double (64-bit float), e.g. 1e400",
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
                        path,
                        "an object key holds a lone surrogate (an unpaired \\ud800-\\udfff "
                        "escape), which is not valid Unicode text",
                    )
                children.append((_join(path, key), item, depth + 1))
        stack.extend(reversed(children))
    return None
