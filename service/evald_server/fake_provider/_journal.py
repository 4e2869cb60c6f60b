"""The fake provider's record of every request: who asked, what happened, how many at once.

Counters (per key, per outcome, in flight and peak per model) are kept for every
request; entries are kept up to ``max_entries`` so a long benchmark cannot exhaust
memory (``truncated`` says when some were dropped). A request is a *duplicate* when
its key had already been answered successfully before it arrived: exactly the
"paid twice for finished work" the engine must never do.
"""

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import anyio

ALL_MODELS = "*"


@dataclass(slots=True)
class JournalEntry:
    seq: int  # arrival number, from 1
    key: str | None  # the X-Evald-Subtask header
    model: str | None
    attempt: int  # how many requests with this key arrived before this one
    stream: bool
    started_at: float  # Unix time
    finished_at: float | None = None
    # ok | http_<status> | quota_requests | quota_tokens | over_capacity | hang | reset |
    # malformed | bad_request
    outcome: str = "pending"
    status: int | None = None  # the HTTP status sent, None when none was
    disconnected: bool = False  # the client went away before the answer was sent
    after_success: bool = False  # the key had already been answered successfully
    client_port: int | None = None  # the client's source port (one per pooled connection)
    # The usage the answer reported (what a bill is computed from); None when not answered.
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # The request's tools, tool_choice and response_format, as sent (absent ones left
    # out; None when it had none of them).
    request_extras: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JournalEntry":
        return cls(**data)


class Journal:
    """Everything the fake has seen; single event loop, so no locking is needed."""

    def __init__(self, *, max_entries: int = 1_000_000) -> None:
        self._max_entries = max_entries
        self._watchers: list[anyio.Event] = []
        self.reset()

    async def changed(self) -> None:
        """Return after the next request begins or ends (for tests that wait on the fake)."""
        event = anyio.Event()
        self._watchers.append(event)
        await event.wait()

    def _notify(self) -> None:
        if self._watchers:
            watchers, self._watchers = self._watchers, []
            for event in watchers:
                event.set()

    def reset(self) -> None:
        self.entries: list[JournalEntry] = []
        self.truncated = False
        self._requests = 0
        self._per_key: Counter[str] = Counter()
        self._succeeded: set[str] = set()
        self._duplicates: Counter[str] = Counter()
        self._outcomes: Counter[str] = Counter()
        self._in_flight: Counter[str] = Counter()
        self._peak: Counter[str] = Counter()
        self._disconnects = 0

    # -- recording (called by the server) --------------------------------------------

    def begin(
        self, key: str | None, model: str | None, *, stream: bool, client_port: int | None = None
    ) -> JournalEntry:
        self._requests += 1
        attempt = 0
        after_success = False
        if key is not None:
            attempt = self._per_key[key]
            self._per_key[key] = attempt + 1
            if key in self._succeeded:
                after_success = True
                self._duplicates[key] += 1
        entry = JournalEntry(
            self._requests,
            key,
            model,
            attempt,
            stream,
            time.time(),
            after_success=after_success,
            client_port=client_port,
        )
        for name in (model or "", ALL_MODELS):
            now = self._in_flight[name] + 1
            self._in_flight[name] = now
            if now > self._peak[name]:
                self._peak[name] = now
        if len(self.entries) < self._max_entries:
            self.entries.append(entry)
        else:
            self.truncated = True
        self._notify()
        return entry

    def end(self, entry: JournalEntry, outcome: str, status: int | None) -> None:
        entry.finished_at = time.time()
        entry.outcome = outcome
        entry.status = status
        self._outcomes[outcome] += 1
        if outcome == "ok" and entry.key is not None:
            self._succeeded.add(entry.key)
        self._leave(entry)

    def disconnect(self, entry: JournalEntry, outcome: str) -> None:
        entry.finished_at = time.time()
        entry.outcome = outcome
        entry.disconnected = True
        self._outcomes[outcome] += 1
        self._disconnects += 1
        self._leave(entry)

    def _leave(self, entry: JournalEntry) -> None:
        for name in (entry.model or "", ALL_MODELS):
            self._in_flight[name] -= 1
        self._notify()

    # -- questions (asked by tests and benchmarks) -----------------------------------

    @property
    def requests(self) -> int:
        return self._requests

    def count(self, key: str) -> int:
        """How many requests carried ``key``."""
        return self._per_key[key]

    def counts(self) -> dict[str, int]:
        return dict(self._per_key)

    def succeeded_keys(self) -> frozenset[str]:
        return frozenset(self._succeeded)

    def duplicates_after_success(self) -> dict[str, int]:
        """Keys requested again after a successful answer, with how many extra requests."""
        return dict(self._duplicates)

    def peak_concurrency(self, model: str | None = None) -> int:
        """The most requests for ``model`` (all models when None) in flight at once."""
        return self._peak[ALL_MODELS if model is None else model]

    def in_flight(self, model: str | None = None) -> int:
        return self._in_flight[ALL_MODELS if model is None else model]

    def disconnects(self) -> list[JournalEntry]:
        """Entries whose client went away before being answered (kept entries only)."""
        return [entry for entry in self.entries if entry.disconnected]

    def client_ports(self) -> set[int]:
        """Distinct client source ports seen: how many TCP connections carried requests."""
        return {entry.client_port for entry in self.entries if entry.client_port is not None}

    def outcomes(self) -> dict[str, int]:
        return dict(self._outcomes)

    def stats(self) -> dict[str, Any]:
        models = sorted(name for name in self._peak if name != ALL_MODELS)
        return {
            "requests": self._requests,
            "outcomes": dict(self._outcomes),
            "disconnects": self._disconnects,
            "duplicates_after_success": sum(self._duplicates.values()),
            "distinct_keys": len(self._per_key),
            "peak_concurrency": {m: self._peak[m] for m in models},
            "peak_concurrency_all": self._peak[ALL_MODELS],
            "in_flight": {m: self._in_flight[m] for m in models},
            "in_flight_all": self._in_flight[ALL_MODELS],
            "truncated": self.truncated,
        }
