"""The program in a model's answer: fenced code from chat models, a continuation of the
prompt from completion models.

Rules, in order (the first that finds code wins; the rule's name is kept):

0. ``\\r\\n`` becomes ``\\n``; a closed ``<think>...</think>`` section (reasoning
   models) is dropped; an answer longer than ``MAX_ANSWER_CHARS`` is cut there.
1. ``fence``: Markdown code fences (``` or ~~~, indented at most 3 spaces). A fence
   tagged ``python``, ``py``, ``python3``, ``py3`` (any case) or untagged holds
   Python; one tagged otherwise (``bash``, ``text``, ``output``...) is skipped. An
   unclosed last fence (the model ran out of tokens) runs to the end. Of the Python
   fences, the **last one that defines the entry point** (``def name(``) wins — models
   put usage examples after the solution, and corrected versions after a first try;
   if none defines it, the longest one. Fences none of which holds Python: no program.
2. ``definition``: no fence, and a line at column 0 defines the entry point: the code
   from the first line at column 0 that starts code (``def``, ``class``, ``import``,
   ``from``, ``@``) to the end, less trailing prose (lines are dropped from the end,
   at most ``MAX_TRIM_LINES``, until the rest parses).
3. ``completion``: otherwise, for a HumanEval problem, the answer continues the prompt
   (a function body): it is cut at the first line at column 0 that starts with
   ``def``, ``class``, ``if``, ``print`` or ``#`` (the Codex paper's stop sequences),
   since a completion model goes on writing tests and examples.
4. ``whole``: otherwise, for an MBPP problem, the whole answer.

An answer with no code at all (blank after the rules) has no program: ``NO_PROGRAM``.

How the code becomes a program (``_assembly``): a completion is appended to the
prompt; a definition or a fence follows the prompt (its imports and helpers), whose
own function is given a ``pass`` body so that the prompt alone is valid. The program
runs with ``__name__ == "__program__"``, so an ``if __name__ == "__main__":`` block in
an answer (doctest runs, input() loops) is defined but not run.
"""

import ast
import re
from dataclasses import dataclass
from enum import StrEnum

from evald_server.code_tasks._records import CodeProblem
from evald_server.datasets import ProblemStyle

MAX_ANSWER_CHARS = 256 * 1024
MAX_TRIM_LINES = 50  # trailing lines dropped, at most, to make a definition parse
PYTHON_TAGS = frozenset({"", "python", "py", "python3", "py3"})
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n`]*$")
_CODE_START = re.compile(r"^(?:def |async def |class |import |from |@)")
_COMPLETION_STOP = re.compile(r"^(?:def |class |if |print\(|#)", re.MULTILINE)


class ExtractionRule(StrEnum):
    FENCE = "fence"
    DEFINITION = "definition"
    COMPLETION = "completion"
    WHOLE = "whole"


@dataclass(frozen=True, slots=True)
class ExtractedCode:
    code: str
    rule: ExtractionRule

    @property
    def continues_prompt(self) -> bool:
        """Whether the code is the rest of the prompt's function (not a whole program)."""
        return self.rule is ExtractionRule.COMPLETION


def extract_code(answer: str, problem: CodeProblem) -> ExtractedCode | None:
    """The code of ``answer`` for ``problem`` (rules in the module docstring), or None."""
    text = _THINK.sub("", answer.replace("\r\n", "\n"))[:MAX_ANSWER_CHARS]
    name = re.escape(problem.entry_point)
    defines = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{name}\b", re.MULTILINE)
    blocks = _fences(text)
    fences = [body for tag, body in blocks if tag.lower() in PYTHON_TAGS]
    if blocks and not fences:
        return None  # fenced code, none of it Python
    if fences:
        with_entry = [body for body in fences if defines.search(body)]
        chosen = with_entry[-1] if with_entry else max(fences, key=len)
        return _found(chosen, ExtractionRule.FENCE)
    top_level = re.compile(rf"^(?:async[ \t]+)?def[ \t]+{name}\b", re.MULTILINE)
    if top_level.search(text):
        return _found(_definition(text), ExtractionRule.DEFINITION)
    if problem.style is ProblemStyle.HUMANEVAL:
        stop = _COMPLETION_STOP.search(text)
        return _found(text[: stop.start()] if stop else text, ExtractionRule.COMPLETION)
    return _found(text, ExtractionRule.WHOLE)


def _found(code: str, rule: ExtractionRule) -> ExtractedCode | None:
    if not code.strip():
        return None
    if rule is not ExtractionRule.COMPLETION:
        code = code.strip("\n") + "\n"
    return ExtractedCode(code, rule)


def _fences(text: str) -> list[tuple[str, str]]:
    """(tag, body) of each fenced block, in order; an unclosed last one runs to the end."""
    blocks: list[tuple[str, str]] = []
    lines = text.split("\n")
    index = 0
    while index < len(lines):
        opening = _FENCE_OPEN.match(lines[index])
        if opening is None:
            index += 1
            continue
        marker, tag = opening.group(1), opening.group(2)
        closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        body: list[str] = []
        index += 1
        while index < len(lines) and not closing.match(lines[index]):
            body.append(lines[index])
            index += 1
        blocks.append((tag, "\n".join(body)))
        index += 1  # past the closing fence
    return blocks


def _definition(text: str) -> str:
    """From the first line that starts code at column 0, less trailing prose."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), 0)
    code = lines[start:]
    whole = "\n".join(code)
    for _ in range(MAX_TRIM_LINES + 1):
        while code and not code[-1].strip():
            code.pop()
        if not code:
            break
        if _parses("\n".join(code)):
            return "\n".join(code)
        code.pop()
    return whole  # no parsing prefix near the end: the sandbox reports the SyntaxError


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True
