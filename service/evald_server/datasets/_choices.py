"""Multiple-choice letters and the gold choice of a record: plain functions, no schema.

Kept apart from the record schemas (pydantic) so that a scoring worker, which reads
gold choices but never validates a record, does not import pydantic.
"""

from collections.abc import Mapping
from typing import Any

MAX_CHOICES = 26  # lettered A-Z


def choice_letter(index: int) -> str:
    """The letter of the ``index``-th choice (0 → "A")."""
    return chr(ord("A") + index)


def gold_choice_index(fields: Mapping[str, Any]) -> int:
    """The 0-based gold choice of a multiple-choice record (either gold field)."""
    if fields.get("answer_index") is not None:
        return int(fields["answer_index"])
    return ord(str(fields["answer_letter"]).upper()) - ord("A")
