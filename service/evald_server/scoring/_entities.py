"""Parse a model's NER answer: a JSON list of ``{"text": ..., "type": ...}``.

Tolerated around it: Markdown code fences (```` ```json ````), prose before and after,
and a top-level object whose ``"entities"`` key holds the list. Fenced blocks are
searched first, then the whole output; in each, decoding starts at every ``[`` or
``{`` from left to right (at most ``_MAX_STARTS`` of them) and the first value that is
an entity list wins: a list that is empty or has at least one item with string
``text`` and ``type`` (its other items are dropped and counted). Nothing found →
unparseable, which the scorer counts as an empty prediction. Never raises.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_OPENING = re.compile(r"[\[{]")
_MAX_STARTS = 64  # bound on decode attempts for a long output full of brackets
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class ParsedEntities:
    entities: tuple[tuple[str, str], ...] | None  # (text, type); None when unparseable
    dropped: int = 0  # items of the list that were not {text: str, type: str}


def _as_entity_list(value: Any) -> ParsedEntities | None:
    if isinstance(value, dict):
        value = value.get("entities")
    if not isinstance(value, list):
        return None
    entities = tuple(
        (item["text"], item["type"])
        for item in value
        if isinstance(item, dict)
        and isinstance(item.get("text"), str)
        and isinstance(item.get("type"), str)
    )
    if value and not entities:
        return None
    return ParsedEntities(entities, len(value) - len(entities))


def _decode_at(text: str, start: int) -> ParsedEntities | None:
    try:
        value, _ = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return _as_entity_list(value)


def _scan(text: str) -> ParsedEntities | None:
    for attempt, match in enumerate(_OPENING.finditer(text)):
        if attempt >= _MAX_STARTS:
            break
        found = _decode_at(text, match.start())
        if found is not None:
            return found
    return None


def parse_entities(output: str) -> ParsedEntities:
    """The entities a model wrote in ``output``; ``entities is None`` if there are none."""
    for fenced in _FENCE.finditer(output):
        found = _scan(fenced.group(1))
        if found is not None:
            return found
    return _scan(output) or ParsedEntities(None)
