"""The two shapes of a code record, without pydantic: which one a record has, and the
function MBPP's tests call (``mbpp_entry_point``). ``_code_records`` validates uploads
against them; ``code_tasks`` reads stored records with them."""

import builtins
import keyword
import re
from enum import StrEnum

_DEF = re.compile(r"^\s*(?:async\s+)?def\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)
_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\(")
_BUILTINS = frozenset(dir(builtins))


class ProblemStyle(StrEnum):
    HUMANEVAL = "humaneval"  # a prompt to complete and a check(candidate) function
    MBPP = "mbpp"  # a description and assert lines


def mbpp_entry_point(code: str | None, tests: list[str]) -> str | None:
    """The function MBPP's tests call: the first the reference defines, else the first
    non-builtin the first test calls; None when there is none."""
    if code:
        defined = _DEF.search(code)
        if defined:
            return defined.group(1)
    for name in _CALL.findall(tests[0] if tests else ""):
        if name not in _BUILTINS and not keyword.iskeyword(name):
            return str(name)
    return None
