"""Whether a tool call made matches a call expected: names, then arguments by type.

An argument matches when its value matches the expected value or one of the record's
alternatives for it, by the expected value's JSON type:

* number: a number (not a boolean, not a numeric string), equal within a relative
  1e-9 (``3`` matches ``3.0``);
* string: a string equal after normalization: Unicode NFKC, case folded, runs of
  whitespace as one space, leading and trailing whitespace removed;
* boolean and null: the same value;
* array: an array of the same length whose items match in order, or in any order
  when the parameter's schema says ``"uniqueItems": true`` (a set);
* object: an object with the same keys whose values match (by the schema's
  ``properties`` for nested arrays).

An expected argument whose accepted values include null may be left out. A call
matches exactly when the names are equal, its arguments are a JSON object, every
expected argument matches, and it has no argument the record did not expect. Calls
made and calls expected are paired one to one (a maximum matching), in any order.
"""

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evald_server.domain import ToolCall

_SPACE = re.compile(r"\s+")


def normalize_string(text: str) -> str:
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def values_match(made: object, expected: object, schema: object = None) -> bool:
    """``made`` matches ``expected`` by the rules above (``schema``: the parameter's)."""
    kind = json_kind(expected)
    if json_kind(made) != kind:
        return False
    if kind == "number":
        return math.isclose(made, expected, rel_tol=1e-9, abs_tol=1e-12)  # type: ignore[arg-type]
    if kind == "string":
        return normalize_string(made) == normalize_string(expected)  # type: ignore[arg-type]
    if kind == "array":
        return _arrays_match(made, expected, schema)  # type: ignore[arg-type]
    if kind == "object":
        return _objects_match(made, expected, schema)  # type: ignore[arg-type]
    return made == expected


def _arrays_match(made: list[Any], expected: list[Any], schema: object) -> bool:
    if len(made) != len(expected):
        return False
    spec = schema if isinstance(schema, Mapping) else {}
    items = spec.get("items")
    if spec.get("uniqueItems") is not True:
        return all(values_match(m, e, items) for m, e in zip(made, expected, strict=True))
    unused = list(made)
    for want in expected:
        found = next((i for i, m in enumerate(unused) if values_match(m, want, items)), None)
        if found is None:
            return False
        unused.pop(found)
    return True


def _objects_match(made: Mapping[str, Any], expected: Mapping[str, Any], schema: object) -> bool:
    if set(made) != set(expected):
        return False
    spec = schema if isinstance(schema, Mapping) else {}
    found = spec.get("properties")
    properties: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    return all(values_match(made[k], v, properties.get(k)) for k, v in expected.items())


@dataclass(frozen=True, slots=True)
class CallComparison:
    """One call made against one call expected."""

    exact: bool
    arguments_matched: int  # expected arguments matched (0 when the names differ)
    wrong_type: bool  # an argument's JSON type is none of the accepted values' types


def compare_call(
    made: ToolCall, expected: Mapping[str, Any], parameters: Mapping[str, Any]
) -> CallComparison:
    """``made`` against one of a record's ``expected_calls`` (``parameters``: the
    function's schema)."""
    if made.name != expected["name"] or made.arguments is None:
        return CallComparison(False, 0, False)
    properties = parameters.get("properties")
    schemas = properties if isinstance(properties, Mapping) else {}
    wanted: Mapping[str, Any] = expected.get("arguments", {})
    alternatives: Mapping[str, Sequence[Any]] = expected.get("alternatives", {})
    matched, wrong_type = 0, False
    for name, value in wanted.items():
        accepted = [value, *alternatives.get(name, ())]
        if name not in made.arguments:
            matched += None in accepted
            continue
        given = made.arguments[name]
        if any(values_match(given, a, schemas.get(name)) for a in accepted):
            matched += 1
        elif json_kind(given) not in {json_kind(a) for a in accepted}:
            wrong_type = True
    extra = any(name not in wanted for name in made.arguments)
    return CallComparison(matched == len(wanted) and not extra, matched, wrong_type)


def matched_pairs(exact: Sequence[Sequence[bool]]) -> int:
    """The most (made, expected) pairs that match exactly, each call in one pair at most
    (``exact[i][j]``: made call i matches expected call j); Kuhn's augmenting paths,
    bounded by the answer's and the record's call limits."""
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j, ok in enumerate(exact[i]):
            if ok and j not in seen:
                seen.add(j)
                if j not in owner or assign(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return sum(assign(i, set()) for i in range(len(exact)))
