"""What a record adds to its model request besides the messages: the tools it offers
and its tool choice, or the JSON Schema its answer must follow.

Encoded once here as JSON text, so that a provider puts them into its request body as
they are (``providers._openai_wire``); None where a record has none.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evald_server.domain import TaskType


@dataclass(frozen=True, slots=True)
class RequestExtras:
    tools: str | None = None  # the OpenAI ``tools`` array
    tool_choice: str | None = None  # "auto" / "required" / "none" / a named function
    json_schema: str | None = None  # the schema a structured answer must follow


NO_EXTRAS = RequestExtras()


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def request_extras(task_type: TaskType, fields: Mapping[str, Any]) -> RequestExtras:
    """The extras of one (validated) record of ``task_type``."""
    if task_type is TaskType.TOOL_CALL:
        choice = fields.get("tool_choice")
        return RequestExtras(
            tools=_compact(fields["tools"]),
            tool_choice=None if choice is None else _compact(choice),
        )
    if task_type is TaskType.STRUCTURED_OUTPUT:
        return RequestExtras(json_schema=_compact(fields["json_schema"]))
    return NO_EXTRAS
