"""JSON ⇄ frozen dataclasses, driven by their type hints (results and events are stored
as JSON and read back as the same typed objects the scorers produced).

Supported field types: dataclasses, ``X | None``, ``tuple[X, ...]``, ``list[X]``,
``dict[str, X]``, str enums and JSON scalars. A field typed as a union of several
dataclasses (a scorer's payload) is stored with a ``"__type__"`` tag.
"""

import dataclasses
import types
import typing
from enum import Enum
from functools import cache
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")

_TAG = "__type__"


def to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        data[_TAG] = type(value).__name__
        return data
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` from ``to_jsonable`` output."""
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = get_args(tp)
        if data is None and type(None) in members:
            return None
        candidates = [m for m in members if m is not type(None)]
        if len(candidates) == 1:
            return from_jsonable(candidates[0], data)
        tag = data.get(_TAG) if isinstance(data, dict) else None
        for member in candidates:
            if isinstance(member, type) and member.__name__ == tag:
                return from_jsonable(member, data)
        raise ValueError(f"cannot tell which of {candidates} the value {tag!r} is")
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], v) for v in data)
        return tuple(from_jsonable(a, v) for a, v in zip(args, data, strict=True))
    if origin is list:
        return [from_jsonable(get_args(tp)[0], v) for v in data]
    if origin is dict or origin is typing.Mapping or tp is dict:
        args = get_args(tp)
        item = args[1] if args else Any
        return {k: from_jsonable(item, v) for k, v in data.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        return tp(
            **{
                f.name: from_jsonable(hints[f.name], data[f.name])
                for f in dataclasses.fields(tp)
                if f.name in data
            }
        )
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(data)
    if tp is float and isinstance(data, int):
        return float(data)
    return data


@cache
def _hints(tp: type) -> dict[str, Any]:
    return get_type_hints(tp)
