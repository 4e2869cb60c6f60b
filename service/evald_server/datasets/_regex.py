"""Dataset-supplied regular expressions, compiled by RE2: matching in linear time.

A generation record's ``reference`` with ``match = "regex"`` comes from whoever
uploaded the dataset. Python's ``re`` backtracks: ``^(a|a)+$`` against 34 ``a``s and a
``!`` runs for minutes and holds a scoring worker (and every tenant waiting for it).
RE2 (``google-re2``) guarantees time linear in the text and refuses what it cannot
do that way (backreferences, lookaround); such a pattern is rejected at upload.
"""

from typing import Any, Protocol

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the error is raised to the caller, not printed by absl


class InvalidRegex(ValueError):
    """RE2 cannot compile the pattern; the message says why."""


class CompiledRegex(Protocol):
    def search(self, text: str) -> Any: ...


def compile_regex(pattern: str) -> CompiledRegex:
    """The RE2 pattern, or ``InvalidRegex`` naming what RE2 refused."""
    try:
        compiled: CompiledRegex = re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise InvalidRegex(f"RE2 cannot compile it: {reason}") from None
    except (TypeError, ValueError) as exc:  # e.g. a lone surrogate cannot be encoded
        raise InvalidRegex(f"RE2 cannot compile it: {exc}") from None
    return compiled
