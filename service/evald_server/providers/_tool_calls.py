"""Tool calls on the OpenAI chat wire: what to send, and the calls read back within bounds.

Sent only for a record that offers tools: its ``tools`` array and ``tool_choice``
as the dataset gives them. Read from ``choices[0].message.tool_calls`` (a streamed
answer's ``delta.tool_calls`` fragments, joined per ``index``: the arguments
concatenated, the name taken from the first fragment that has one), each call's
``function.name`` and ``function.arguments`` (a JSON text, or an object from servers
that send one). What a model sends is hostile data, and a tool call is the model's
answer: a call that breaks a bound is kept as a *malformed* call (it scores as a call
that matches nothing), never raw and never a failed request.

========================  ===================================  ==========================
field                     accepted                             otherwise
========================  ===================================  ==========================
calls per answer          ``MAX_TOOL_CALLS``                   the first ones kept,
                                                               ``tool_calls_truncated``
function name             a string, ``MAX_NAME_CHARS``         "" and malformed,
                                                               ``tool_call_invalid``
arguments                 a JSON object of at most             malformed (the sample's
                          ``MAX_ARGUMENTS_BYTES``, nested at   outcome); the text kept
                          most ``MAX_ARGUMENT_NESTING``        when within the size bound
tool_calls                a list of objects                    none, ``tool_calls_invalid``
========================  ===================================  ==========================
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from evald_server.domain import ToolCall

MAX_TOOL_CALLS = 32
MAX_NAME_CHARS = 256
MAX_ARGUMENTS_BYTES = 65_536
MAX_ARGUMENT_NESTING = 32

TOOL_CALLS_TRUNCATED = "tool_calls_truncated"
TOOL_CALL_INVALID = "tool_call_invalid"
TOOL_CALLS_INVALID = "tool_calls_invalid"


def tool_fields(tools: str | None, tool_choice: str | None) -> str:
    """The body's ``,"tools":[…],"tool_choice":…`` (pre-encoded JSON), or ""."""
    if tools is None:
        return ""
    choice = "" if tool_choice is None else f',"tool_choice":{tool_choice}'
    return f',"tools":{tools}{choice}'


def checked_tool_calls(value: object) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
    """The calls of a message's ``tool_calls`` (absent or null: none), and the flags of
    what was out of bounds."""
    if value is None:
        return (), ()
    if not isinstance(value, list):
        return (), (TOOL_CALLS_INVALID,)
    flags: list[str] = []
    if len(value) > MAX_TOOL_CALLS:
        flags.append(TOOL_CALLS_TRUNCATED)
    calls = []
    for item in value[:MAX_TOOL_CALLS]:
        function = item.get("function") if isinstance(item, Mapping) else None
        if not isinstance(function, Mapping):
            flags.append(TOOL_CALLS_INVALID)
            continue
        call, invalid = _checked_call(function.get("name"), function.get("arguments"))
        calls.append(call)
        if invalid:
            flags.append(TOOL_CALL_INVALID)
    return tuple(calls), tuple(dict.fromkeys(flags))


def _checked_call(name: object, arguments: object) -> tuple[ToolCall, bool]:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        why = f"the function name is not a string of 1 to {MAX_NAME_CHARS} characters"
        return ToolCall("", None, "", why), True
    name = name.encode("utf-8", "replace").decode()  # no lone surrogates in a store
    if isinstance(arguments, Mapping):
        if _depth(arguments) > MAX_ARGUMENT_NESTING:
            return ToolCall(
                name, None, "", f"arguments nested deeper than {MAX_ARGUMENT_NESTING}"
            ), False
        text = json.dumps(arguments, ensure_ascii=False)
    elif isinstance(arguments, str):
        text = arguments.encode("utf-8", "replace").decode()
    elif arguments is None:
        text = ""
    else:
        return ToolCall(name, None, "", f"arguments are a JSON {type(arguments).__name__}"), False
    if len(text.encode()) > MAX_ARGUMENTS_BYTES:
        return ToolCall(name, None, "", f"arguments over {MAX_ARGUMENTS_BYTES} bytes"), True
    return _parsed(name, text), False


def _parsed(name: str, text: str) -> ToolCall:
    if not text.strip():
        return ToolCall(name, None, text, "no arguments (an empty text, not {})")
    try:
        value = json.loads(text)
    except RecursionError:
        return ToolCall(name, None, text, f"arguments nested deeper than {MAX_ARGUMENT_NESTING}")
    except ValueError as exc:
        return ToolCall(name, None, text, f"arguments are not JSON ({_first_line(exc)})")
    if not isinstance(value, dict):
        return ToolCall(name, None, text, f"arguments are a JSON {_kind(value)}, not an object")
    if _depth(value) > MAX_ARGUMENT_NESTING:
        return ToolCall(name, None, text, f"arguments nested deeper than {MAX_ARGUMENT_NESTING}")
    return ToolCall(name, value)


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:120]


def _kind(value: object) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _depth(value: object) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if level > MAX_ARGUMENT_NESTING:
            break
        children = (
            node.values() if isinstance(node, Mapping) else node if isinstance(node, list) else ()
        )
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


@dataclass(slots=True)
class StreamedToolCalls:
    """Joins a stream's ``delta.tool_calls`` fragments per ``index``, bounded: at most
    ``MAX_TOOL_CALLS`` indexes and ``MAX_ARGUMENTS_BYTES`` (+1) of text per call."""

    names: dict[int, str] = field(default_factory=dict)
    arguments: dict[int, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    seen: bool = False

    def feed(self, fragments: object) -> None:
        if fragments is None:
            return
        self.seen = True
        if not isinstance(fragments, list):
            self.flags.append(TOOL_CALLS_INVALID)
            return
        for fragment in fragments:
            index = fragment.get("index", 0) if isinstance(fragment, Mapping) else None
            function = fragment.get("function") if isinstance(fragment, Mapping) else None
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                self.flags.append(TOOL_CALLS_INVALID)
                continue
            if index >= MAX_TOOL_CALLS:
                self.flags.append(TOOL_CALLS_TRUNCATED)
                continue
            self.names.setdefault(index, "")
            self.arguments.setdefault(index, "")
            if not isinstance(function, Mapping):
                continue
            name, arguments = function.get("name"), function.get("arguments")
            # OpenAI and vLLM send a call's name once, whole, in its first fragment;
            # llama-cpp-python repeats it in every fragment: the first one counts.
            if isinstance(name, str) and name and not self.names[index]:
                self.names[index] = name
            if isinstance(arguments, str) and len(self.arguments[index]) <= MAX_ARGUMENTS_BYTES:
                self.arguments[index] += arguments

    def result(self) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
        calls = [
            {"function": {"name": self.names[i], "arguments": self.arguments[i]}}
            for i in sorted(self.names)
        ]
        checked, flags = checked_tool_calls(calls)
        return checked, tuple(dict.fromkeys([*self.flags, *flags]))
