"""JSON Schemas that come from a dataset: checked once at upload, validated without I/O.

A structured-output record's ``schema`` and a tool's ``parameters`` are written by
whoever uploads the dataset, and the scorer later runs them against model answers on
a shared server. ``schema_problem`` refuses at upload what could hurt it, naming the
problem and where (``json_schema.properties.tags``):

==========================  =====================================================
refused                     why
==========================  =====================================================
over ``MAX_SCHEMA_BYTES``   a schema is a shape, not a corpus
deeper than                 the validator recurses once per level
``MAX_SCHEMA_DEPTH``
a ``$ref`` not starting     evald never fetches a schema: no network, no files;
with ``#``                  inline it under ``$defs``
a local ``$ref`` that does  it would fail only when an answer reaches it
not resolve, or a ``$ref``
cycle that never descends
an unknown ``$schema``      the draft decides the rules; unknown is ambiguous
``patternProperties``       its patterns would run on Python's backtracking ``re``
a ``pattern`` RE2 refuses   patterns run on RE2 (linear time), never on ``re``
not a valid schema          checked against its draft's metaschema
==========================  =====================================================

``schema_validator`` builds the validator the scorer uses: the schema's draft (2020-12
when it names none), ``pattern`` matched by RE2, and a registry whose only retrieval
refuses — a remote ``$ref`` that got past upload is unresolvable, never fetched
(jsonschema's default registry would fetch it with ``urlopen``).
"""

import functools
import json
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import referencing
import referencing.exceptions
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator

from evald_server.datasets._regex import CompiledRegex, InvalidRegex, compile_regex

MAX_SCHEMA_BYTES = 65_536  # the schema as compact JSON
MAX_SCHEMA_DEPTH = 32  # nested objects and arrays, the schema itself at depth 1
_REF_KEYWORDS = ("$ref", "$dynamicRef", "$recursiveRef")
# Keywords whose values are instance data, not subschemas: a "$ref" key in a const is data.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
_PROBES: tuple[object, ...] = (None, True, 0, "", [], {})


def _refuse_retrieval(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(uri)


_NO_RETRIEVAL: referencing.Registry[Any] = referencing.Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]


@functools.lru_cache(maxsize=256)
def _re2(pattern: str) -> CompiledRegex:
    return compile_regex(pattern)


def _re2_pattern(
    validator: Validator, pattern: str, instance: object, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    try:
        found = _re2(pattern).search(instance)  # type: ignore[arg-type]
    except InvalidRegex as exc:
        yield ValidationError(f"pattern {pattern!r} cannot be used: {exc}")
        return
    if found is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@functools.lru_cache(maxsize=16)
def _safe_class(draft: Any) -> Any:
    return jsonschema.validators.extend(draft, validators={"pattern": _re2_pattern})


def _draft(schema: object) -> Any:
    """The validator class of the draft ``$schema`` names (2020-12 when none), or None."""
    if isinstance(schema, Mapping) and "$schema" in schema:
        if not isinstance(schema["$schema"], str):
            return None
        return jsonschema.validators.validator_for(schema, default=None)
    return jsonschema.Draft202012Validator


def schema_validator(schema: Mapping[str, Any] | bool) -> Validator:
    """The validator of a schema ``schema_problem`` accepted (I/O-free, RE2 patterns)."""
    draft = _draft(schema) or jsonschema.Draft202012Validator
    validator: Validator = _safe_class(draft)(schema, registry=_NO_RETRIEVAL)
    return validator


@functools.lru_cache(maxsize=256)
def validator_of(text: str) -> Validator:
    """``schema_validator`` of a schema given as its JSON text, the last ones kept."""
    return schema_validator(json.loads(text))


def _nodes(value: object, path: str, depth: int) -> Iterator[tuple[str, int, object]]:
    """Every (path, depth, value) of a schema, not descending into data keywords."""
    stack: list[tuple[str, int, object]] = [(path, depth, value)]
    while stack:
        here, level, node = stack.pop()
        yield here, level, node
        if isinstance(node, Mapping):
            for key, child in node.items():
                if key not in _DATA_KEYWORDS and isinstance(child, Mapping | list):
                    stack.append((f"{here}.{key}", level + 1, child))
        elif isinstance(node, list):
            for index, child in enumerate(node):
                if isinstance(child, Mapping | list):
                    stack.append((f"{here}[{index}]", level + 1, child))


def schema_problem(schema: object, path: str = "schema") -> str | None:
    """What is wrong with a dataset's JSON Schema for evald (``path: problem``), or None.

    The records of a dataset mostly share their schemas (a tool's parameters, a task's
    answer shape), and checking one against its metaschema takes milliseconds: the
    verdicts of the last 256 schemas are kept, by their JSON text."""
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, Mapping):
        return f"{path}: a JSON Schema is an object (or true / false), not {type(schema).__name__}"
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return f"{path}: not JSON, or nested too deep to read"
    size = len(text.encode())
    if size > MAX_SCHEMA_BYTES:
        return f"{path}: {size} bytes as JSON, over the limit of {MAX_SCHEMA_BYTES}"
    return _cached_problem(text, path)


@functools.lru_cache(maxsize=256)
def _cached_problem(text: str, path: str) -> str | None:
    return _problem(json.loads(text), path)


def _problem(schema: Mapping[str, Any], path: str) -> str | None:
    draft = _draft(schema)
    if draft is None:
        return f"{path}.$schema: unknown draft {schema['$schema']!r}"
    refs: list[tuple[str, str]] = []
    for here, depth, node in _nodes(schema, path, 1):
        if depth > MAX_SCHEMA_DEPTH:
            return f"{here}: nested deeper than {MAX_SCHEMA_DEPTH} levels"
        if not isinstance(node, Mapping):
            continue
        problem = _node_problem(here, node)
        if problem is not None:
            return problem
        refs.extend((f"{here}.{k}", node[k]) for k in _REF_KEYWORDS if isinstance(node.get(k), str))
    try:
        draft.check_schema(schema)
    except SchemaError as exc:
        # check_schema raised its best match already.
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        return f"{path}{where}: not a valid schema: {_cut(exc.message)}"
    validator = schema_validator(schema)
    for here, ref in refs:
        try:
            validator._resolver.lookup(ref)
        except Exception:  # Unresolvable, or a reference too odd to parse
            return f"{here}: {_cut(ref)!r} does not resolve within the schema"
    try:
        for probe in _PROBES:
            validator.is_valid(probe)
    except RecursionError:
        return f"{path}: its $ref chain loops without descending into the value"
    except referencing.exceptions.Unresolvable as exc:
        return f"{path}: a $ref does not resolve within the schema ({_cut(str(exc))})"
    except Exception as exc:  # a schema the metaschema allows and the validator cannot use
        return f"{path}: cannot be used to validate ({type(exc).__name__}: {_cut(str(exc))})"
    return None


def _node_problem(here: str, node: Mapping[str, Any]) -> str | None:
    for keyword in _REF_KEYWORDS:
        ref = node.get(keyword)
        if isinstance(ref, str) and not ref.startswith("#"):
            return (
                f"{here}.{keyword}: {_cut(ref)!r} refers outside the schema; evald never "
                "fetches a schema (no network, no files): inline it under $defs"
            )
    if "patternProperties" in node:
        return (
            f"{here}.patternProperties: not supported (its patterns would run on Python's "
            "backtracking regex engine); use propertyNames with a pattern"
        )
    pattern = node.get("pattern")
    if isinstance(pattern, str):
        try:
            _re2(pattern)
        except InvalidRegex as exc:
            return f"{here}.pattern: {exc}"
    return None


def _cut(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
