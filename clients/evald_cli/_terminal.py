"""What the CLI shows on a terminal, from text a server sent (model answers, names,
error messages): shown, never obeyed.

* Control characters (C0 but a newline, DEL, C1 — ESC among them) and the Unicode bidi
  embedding, override and isolate controls are shown escaped (``\\x1b``, ``\\u202e``):
  a model's answer cannot move the cursor, set the clipboard (OSC 52), retitle the
  window or reorder what the line shows.
* Square brackets are text, not rich markup, and ``:name:`` is text, not an emoji: an
  answer "[/]" used to end ``evald samples`` with rich's MarkupError traceback.

``TerminalConsole`` applies both to everything it prints (a ``str`` before it is laid
out, and every rendered piece of text again, so a ``Text`` built from server text is
covered too); ``printable`` is the same rule for a plain ``print``.
"""

import re
from collections.abc import Iterator
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

# Escaped rather than printed: C0 controls but newline, DEL, C1 controls, and the bidi
# controls (LRE, RLE, PDF, LRO, RLO; LRI, RLI, FSI, PDI).
_UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character escaped (newlines too when ``one_line``)."""
    return (_UNSAFE_ONE_LINE if one_line else _UNSAFE).sub(_escaped, text)


class TerminalConsole(Console):
    """A rich ``Console`` for server data: no markup, no emoji codes, controls escaped."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, emoji=False, **options)

    def render_str(self, text: str, **options: Any) -> Text:
        return super().render_str(printable(text), **options)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterator[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _UNSAFE.search(segment.text):
                yield Segment(printable(segment.text), segment.style)
            else:
                yield segment
