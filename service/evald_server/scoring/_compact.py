"""Share equal small values between the records of one task while it is scored.

Scoring needs every sample of a task at once (a 100,000-sample task is 100,000 records
in the scoring worker's memory), and decoded JSON gives each record its own copy of
values that repeat across records: labels, the list of choices, short answers. Mapping
equal values to one object shrinks that. Records are read-only everywhere they go.
"""

import sys
from typing import Any

_SHORT = 32  # longer strings are rarely repeated
_MAX_MEMO = 10_000  # bounded: unique values would only make the memo grow


class Compactor:
    def __init__(self) -> None:
        self._memo: dict[Any, Any] = {}

    def _share(self, key: Any, value: Any) -> Any:
        found = self._memo.get(key)
        if found is not None:
            return found
        if len(self._memo) < _MAX_MEMO:
            self._memo[key] = value
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._share(value, value) if len(value) <= _SHORT else value
        if isinstance(value, list):
            items = [self.value(v) for v in value]
            if len(items) <= 64 and all(isinstance(v, str) for v in items):
                return self._share(("list", *items), items)
            return items
        if isinstance(value, dict):
            return {sys.intern(k): self.value(v) for k, v in value.items()}
        return value
