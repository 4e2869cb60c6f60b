"""docs/configuration.md is checked against the configuration's pydantic models.

The models of ``service/evald_server/config.py`` are walked from ``ServerConfig`` down:
a field whose type is a model is a section (``[store]``, ``[models.params]``), a tuple
of models an array of tables (``[[models]]``, ``[[auth.tokens]]``), any other field a
key of its section. The page has one table per section under a heading that names it
(``## `[server]` ``), with the columns key | default | meaning. Every key must have a
row, every row a key, and every documented default must be the code's default:

- ``required`` for a key without a default;
- a code span holding a TOML literal (``256``, ``0.02``, ``"127.0.0.1:50051"``,
  ``false``, ``[]``) or a size (``1 MiB``), optionally followed by a parenthetical
  (``604800`` (7 days));
- any words when the code's default is ``None``: the server computes it at start
  (``host name + pid``) or the key is off (``— (off)``).

The checker is tried on a config with a key added and on a page with a wrong default,
so that it is known to fail when the two drift apart.
"""

import re
import tomllib
import types
from collections.abc import Iterator
from dataclasses import dataclass
from inspect import isclass
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, create_model
from pydantic.fields import FieldInfo

from evald_server.config import AdaptiveConcurrency, ModelConfig, ServerConfig, ServerSection

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

_HEADING = re.compile(r"^#{2,6} `(\[\[?[a-z_.]+\]\]?)`\s*$")
_ANY_HEADING = re.compile(r"^#{1,6} ")
_KEY_CELL = re.compile(r"^`([a-z_][a-z0-9_]*)`$")
_CODE_SPAN = re.compile(r"^`([^`]+)`$")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)$")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?) (KiB|MiB|GiB)$")
_UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_HEADER = ["key", "default", "meaning"]


# --- the configuration's side ------------------------------------------------------


def _nested(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the section model, whether it is an array of tables) of a field's type, or
    (None, False) for a plain key."""
    if isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation, False
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        inner = args[0]
        if isclass(inner) and issubclass(inner, BaseModel):
            return inner, True
    if origin in (Union, types.UnionType):
        models = [a for a in args if isclass(a) and issubclass(a, BaseModel)]
        if models and len(models) == len([a for a in args if a is not type(None)]):
            (model,) = models
            return model, False
    return None, False


def config_sections(root: type[BaseModel]) -> dict[str, dict[str, FieldInfo]]:
    """Every section of the config with keys of its own, by its TOML heading
    (``[server]``, ``[[models]]``, ``[models.adaptive_concurrency]``), nested ones
    included: heading → key → field."""
    sections: dict[str, dict[str, FieldInfo]] = {}

    def walk(model: type[BaseModel], path: str, array: bool) -> None:
        keys: dict[str, FieldInfo] = {}
        for name, field in model.model_fields.items():
            section, is_array = _nested(field.annotation)
            if section is None:
                keys[name] = field
            else:
                walk(section, f"{path}.{name}" if path else name, is_array)
        if keys:
            sections[f"[[{path}]]" if array else f"[{path}]"] = keys

    walk(root, "", False)
    return sections


# --- the page's side ------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    section: str
    key: str
    default: str
    line: int


def _cells(line: str) -> list[str]:
    inner = line.strip()
    inner = inner.removeprefix("|").removesuffix("|")
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def documented_rows(text: str) -> tuple[dict[str, list[Row]], list[str]]:
    """The page's tables by section heading, and what is malformed in them."""
    tables: dict[str, list[Row]] = {}
    problems: list[str] = []
    section: str | None = None
    seen_header = False
    for number, line in enumerate(text.splitlines(), start=1):
        heading = _HEADING.match(line)
        if heading:
            section = heading.group(1)
            if section in tables:
                problems.append(f"line {number}: {section} has a second heading")
            tables[section] = []
            seen_header = False
            continue
        if _ANY_HEADING.match(line):
            section = None
            continue
        if section is None or not line.startswith("|"):
            continue
        cells = _cells(line)
        if not seen_header:
            if cells != _HEADER:
                problems.append(f"line {number}: {section}: the columns must be {_HEADER}")
            seen_header = True
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the separator row
        key = _KEY_CELL.match(cells[0])
        if len(cells) != 3 or key is None:
            problems.append(f"line {number}: {section}: a row must be `key` | default | meaning")
            continue
        tables[section].append(Row(section, key.group(1), cells[1], number))
    return tables, problems


def _literal(cell: str) -> object:
    """The value a default cell states: a TOML literal or a size in a code span, after
    any trailing parenthetical. ``ValueError`` when it states none."""
    text = _PARENTHETICAL.sub("", cell)
    span = _CODE_SPAN.match(text)
    if span is None:
        raise ValueError("not a `literal` in a code span")
    literal = span.group(1)
    size = _SIZE.match(literal)
    if size:
        number = float(size.group(1)) * _UNITS[size.group(2)]
        return int(number) if number.is_integer() else number
    try:
        return tomllib.loads(f"value = {literal}")["value"]
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not a TOML literal: {literal}") from exc


def _same(documented: object, default: object) -> bool:
    if isinstance(default, tuple):
        default = list(default)
    if isinstance(default, Path):
        default = str(default)
    if isinstance(default, bool) or isinstance(documented, bool):
        return type(documented) is type(default) and documented == default
    if isinstance(default, int | float):
        return isinstance(documented, int | float) and documented == default
    return type(documented) is type(default) and documented == default


def _default_problem(where: str, field: FieldInfo, cell: str) -> str | None:
    if field.is_required():
        if cell != "required":
            return f"{where}: the key is required, the page says {cell!r}"
        return None
    default = field.get_default(call_default_factory=True)
    if cell == "required":
        return f"{where}: the page says required, the key defaults to {default!r}"
    if default is None:
        return None  # computed at start or off: the page says it in words
    try:
        documented = _literal(cell)
    except ValueError as exc:
        return f"{where}: the default {cell!r} cannot be read ({exc}); the code has {default!r}"
    if not _same(documented, default):
        return f"{where}: the page says {cell!r}, the code's default is {default!r}"
    return None


def doc_mismatches(text: str, root: type[BaseModel]) -> list[str]:
    """Every disagreement between the page ``text`` and the config rooted at ``root``."""
    tables, problems = documented_rows(text)
    sections = config_sections(root)
    for heading in sorted(set(sections) - set(tables)):
        problems.append(f"{heading}: a section of the config with no table on the page")
    for heading in sorted(set(tables) - set(sections)):
        problems.append(f"{heading}: a table on the page for no section of the config")
    for heading in sorted(set(sections) & set(tables)):
        fields = sections[heading]
        rows = tables[heading]
        counted: dict[str, int] = {}
        for row in rows:
            counted[row.key] = counted.get(row.key, 0) + 1
            where = f"{heading} {row.key} (line {row.line})"
            if row.key not in fields:
                problems.append(f"{where}: documented, but the config has no such key")
                continue
            problem = _default_problem(where, fields[row.key], row.default)
            if problem:
                problems.append(problem)
        problems += [
            f"{heading} {key}: documented {n} times" for key, n in counted.items() if n > 1
        ]
        problems += [
            f"{heading} {key}: a key of the config that the page does not document"
            for key in fields
            if key not in counted
        ]
    return problems


# --- the checks ---------------------------------------------------------------------


def test_every_key_of_the_config_is_documented_with_its_default() -> None:
    assert doc_mismatches(DOC.read_text(encoding="utf-8"), ServerConfig) == []


def test_the_walk_reaches_every_section_nested_ones_included() -> None:
    assert set(config_sections(ServerConfig)) == {
        "[server]",
        "[store]",
        "[limits]",
        "[[models]]",
        "[models.params]",
        "[models.simulator]",
        "[models.adaptive_concurrency]",
        "[models.price]",
        "[engine]",
        "[cache]",
        "[sandbox]",
        "[metrics]",
        "[[auth.tokens]]",
    }


def _with_server_key() -> type[BaseModel]:
    server = create_model("ServerWithKnob", __base__=ServerSection, drain_notice_s=(float, 3.0))
    return create_model("ConfigWithKnob", __base__=ServerConfig, server=(server, server()))


def _with_nested_key() -> type[BaseModel]:
    adaptive = create_model("AdaptiveWithKnob", __base__=AdaptiveConcurrency, probe_every=(int, 4))
    model = create_model(
        "ModelWithKnob", __base__=ModelConfig, adaptive_concurrency=(adaptive, adaptive())
    )
    return create_model(
        "ConfigWithNestedKnob", __base__=ServerConfig, models=(tuple[model, ...], ())
    )


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (_with_server_key, "[server] drain_notice_s: a key of the config that the page does not"),
        (_with_nested_key, "[models.adaptive_concurrency] probe_every: a key of the config that"),
    ],
)
def test_a_key_added_to_the_config_without_a_row_fails(config: Any, named: str) -> None:
    problems = doc_mismatches(DOC.read_text(encoding="utf-8"), config())
    assert len(problems) == 1, problems
    assert problems[0].startswith(named)


def _rows_replaced(old: str, new: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("| `grace_s` | `10` |", "| `grace_s` | `11` |", "[server] grace_s"),
        ("| `max_record_bytes` | `1 MiB` |", "| `max_record_bytes` | `2 MiB` |", "[limits]"),
        ("| `ttl_s` | `604800` (7 days) |", "| `ttl_s` | `86400` (7 days) |", "[cache] ttl_s"),
        ("| `stream` | `false` |", "| `stream` | `true` |", "[[models]] stream"),
        ("| `stop` | `[]` |", '| `stop` | `["\\n"]` |', "[models.params] stop"),
        ('| `listen` | `"127.0.0.1:50051"` |', '| `listen` | `"0.0.0.0:50051"` |', "[server]"),
        ("| `min` | `1` |", "| `min` | 1 |", "[models.adaptive_concurrency] min"),
        ("| `tenant` | required |", "| `tenant` | `admin` |", "[[auth.tokens]] tenant"),
        ("| `enabled` | `false` |", "| `enabled` | `0` |", "[models.adaptive_concurrency]"),
    ],
)
def test_a_wrong_documented_default_fails(old: str, new: str, named: str) -> None:
    problems = doc_mismatches(_rows_replaced(old, new), ServerConfig)
    assert len(problems) == 1, problems
    assert problems[0].startswith(named)


def test_a_documented_key_that_does_not_exist_fails() -> None:
    text = _rows_replaced(
        "| `grace_s` | `10` |", "| `grace_seconds` | `10` | gone |\n| `grace_s` | `10` |"
    )
    problems = doc_mismatches(text, ServerConfig)
    assert len(problems) == 1, problems
    assert problems[0].startswith("[server] grace_seconds")
    assert "no such key" in problems[0]


def test_a_section_without_its_table_fails() -> None:
    problems = doc_mismatches(_rows_replaced("## `[metrics]`", "## Metrics"), ServerConfig)
    assert problems == ["[metrics]: a section of the config with no table on the page"]


def _iter_literals() -> Iterator[tuple[str, object]]:
    yield "`256`", 256
    yield "`0.02`", 0.02
    yield "`1 MiB`", 1 << 20
    yield "`512 MiB`", 512 << 20
    yield "`604800` (7 days)", 604800
    yield '`"sqlite:///evald.sqlite3"`', "sqlite:///evald.sqlite3"
    yield "`[]`", []
    yield "`false`", False


@pytest.mark.parametrize(("cell", "value"), list(_iter_literals()))
def test_default_cells_are_read_as_literals(cell: str, value: object) -> None:
    assert _literal(cell) == value


@pytest.mark.parametrize("cell", ["256", "`256 KB`", "— (off)", "`sixty`"])
def test_a_default_cell_that_states_no_literal_is_refused(cell: str) -> None:
    with pytest.raises(ValueError, match="not a"):
        _literal(cell)
