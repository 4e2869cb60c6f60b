"""JSON ⇄ frozen dataclasses, driven by their type hints (results and events are stored
as JSON and read back as the same typed objects the scorers produced).

Supported field types: dataclasses, ``X | None``, ``tuple[X, ...]``, ``list[X]``,
``dict[str, X]``, str enums and JSON scalars. A field typed as a union of several
dataclasses (a scorer's payload) is stored with a ``"__type__"`` tag.

Each type's decoder is built once from its hints and cached (a closure per field),
and each dataclass's field names are looked up once: every progress snapshot a
watcher reads goes through here, and walking the hints on every value cost ~10x the
hand-written decoders this replaced.
"""

import dataclasses
import types
import typing
from collections.abc import Callable
from enum import Enum
from functools import cache
from typing import Any, TypeVar, get_args, get_origin, get_type_hints

T = TypeVar("T")
Decoder = Callable[[Any], Any]

_TAG = "__type__"
_SCALARS = frozenset({str, int, float, bool, type(None)})


def to_jsonable(value: Any) -> Any:
    cls: Any = type(value)
    if cls in _SCALARS:
        return value
    names = _field_names(cls)
    if names is not None:
        data = {name: to_jsonable(getattr(value, name)) for name in names}
        data[_TAG] = cls.__name__
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
    return _decoder(tp)(data)


@cache
def _field_names(cls: type) -> tuple[str, ...] | None:
    """A dataclass's field names; None for any other class."""
    if not dataclasses.is_dataclass(cls):
        return None
    return tuple(f.name for f in dataclasses.fields(cls))


def _same(data: Any) -> Any:
    return data


@cache
def _decoder(tp: Any) -> Decoder:
    origin = get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union(tp)
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _decoder(args[0])
            return lambda data: tuple(item(v) for v in data)
        items = tuple(_decoder(a) for a in args)
        return lambda data: tuple(f(v) for f, v in zip(items, data, strict=True))
    if origin is list:
        item = _decoder(get_args(tp)[0])
        return lambda data: [item(v) for v in data]
    if origin is dict or origin is typing.Mapping or tp is dict:
        args = get_args(tp)
        value = _decoder(args[1]) if args else _same
        return lambda data: {k: value(v) for k, v in data.items()}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp
    if tp is float:
        return lambda data: float(data) if isinstance(data, int) else data
    return _same


def _union(tp: Any) -> Decoder:
    members = get_args(tp)
    optional = type(None) in members
    candidates = [m for m in members if m is not type(None)]
    if len(candidates) == 1:
        inner = _decoder(candidates[0])
        return lambda data: None if data is None and optional else inner(data)
    tagged = {m.__name__: m for m in candidates if isinstance(m, type)}

    def decode(data: Any) -> Any:
        if data is None and optional:
            return None
        tag = data.get(_TAG) if isinstance(data, dict) else None
        member = tagged.get(tag) if isinstance(tag, str) else None
        if member is None:
            raise ValueError(f"cannot tell which of {candidates} the value {tag!r} is")
        return _decoder(member)(data)

    return decode


def _dataclass(tp: type) -> Decoder:
    # Field decoders are resolved on first use: a dataclass may refer to itself.
    fields: list[tuple[str, Decoder]] = []

    def decode(data: Any) -> Any:
        if not fields and _field_names(tp):
            hints = get_type_hints(tp)
            fields.extend((name, _decoder(hints[name])) for name in _field_names(tp) or ())
        return tp(**{name: field(data[name]) for name, field in fields if name in data})

    return decode
