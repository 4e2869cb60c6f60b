"""A tool-call answer as one stored text: the content and the calls, canonical JSON.

A tool-call task's answer is the calls the model made, not its text. The provider
boundary parses them (``providers._tool_calls``); the executor stores the answer as
this module encodes it, in the sample's output, so that ListSamples shows the calls
and the scorer (in another process) reads them back with ``decode_tool_answer``:

    {"content": "...", "tool_calls": [{"name": "get_weather", "arguments": {...}}]}

A call whose arguments were not a JSON object keeps them as text instead
(``"arguments_text"``) with the reason (``"malformed"``): malformed arguments are an
outcome of the sample, scored as a call that matches nothing, never an error.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call: its function name and its arguments, parsed (``arguments``) or, when
    they are not a JSON object, the text that came (``arguments_text``) and why."""

    name: str
    arguments: Mapping[str, Any] | None = None
    arguments_text: str = ""
    malformed: str = ""  # why the arguments are not an object ("" when they are)


def encode_tool_answer(content: str, calls: tuple[ToolCall, ...]) -> str:
    """The stored text of an answer (keys in a fixed order, non-ASCII kept)."""
    encoded = []
    for call in calls:
        item: dict[str, Any] = {"name": call.name}
        if call.malformed:
            item["arguments_text"] = call.arguments_text
            item["malformed"] = call.malformed
        else:
            item["arguments"] = dict(call.arguments or {})
        encoded.append(item)
    return json.dumps({"content": content, "tool_calls": encoded}, ensure_ascii=False)


class NotAToolAnswer(ValueError):
    """A stored output that ``encode_tool_answer`` did not write."""


def decode_tool_answer(text: str) -> tuple[str, tuple[ToolCall, ...]]:
    """The content and calls of a stored answer, or ``NotAToolAnswer``."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise NotAToolAnswer(f"not JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tool_calls"), list):
        raise NotAToolAnswer("no tool_calls list")
    content = data.get("content")
    calls = []
    for item in data["tool_calls"]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise NotAToolAnswer("a call without a name")
        arguments = item.get("arguments")
        if isinstance(arguments, dict):
            calls.append(ToolCall(item["name"], arguments))
        else:
            text_value = item.get("arguments_text")
            calls.append(
                ToolCall(
                    item["name"],
                    None,
                    text_value if isinstance(text_value, str) else "",
                    str(item.get("malformed") or "arguments are not a JSON object"),
                )
            )
    return (content if isinstance(content, str) else ""), tuple(calls)
