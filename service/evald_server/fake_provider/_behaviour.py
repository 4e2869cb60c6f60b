"""What the fake provider does with each request: behaviours, fault mix, latency.

A ``Behaviour`` is one way of answering (success, an HTTP error, a hang, a reset, a
malformed body). ``FakeConfig`` says which behaviour a request gets, in this order:

1. ``per_key[K][i]``: the i-th request (0-based) carrying ``X-Evald-Subtask: K``;
2. ``per_prompt[M]``: a request whose last message contains the marker ``M`` (the
   first marker that matches, in the mapping's order) — how a test scripts the answer
   to one record without knowing its subtask's id;
3. ``sequence[n]``: the n-th request (0-based) the fake receives;
4. otherwise a draw from the ``faults`` mix (rates), else success.

Random draws hash ``(seed, key or arrival number, attempt)`` with blake2b, so a given
subtask's k-th attempt meets the same fate whatever order requests arrive in.
Everything here converts to and from JSON for the control API (``POST /_fake/config``).
"""

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from statistics import NormalDist
from typing import Any

from evald_server.fake_provider._quota import Quota

_UNIT = NormalDist()
_TWO_64 = float(1 << 64)


class Kind(StrEnum):
    OK = "ok"
    STATUS = "status"  # an HTTP error status with an OpenAI-style error body
    HANG = "hang"  # no answer for ``hang_s`` (or until the client goes away)
    RESET = "reset"  # the connection is closed abruptly (RST), no response
    MALFORMED = "malformed"  # HTTP 200 with a truncated JSON body (or SSE chunk)
    # A stream cut after ``after_chunks`` events by a bare ``data: [DONE]``, no
    # finish_reason: what llama-cpp-python's server sends when it interrupts a stream
    # for the next request. Not streamed: a completion whose finish_reason is null.
    INTERRUPTED = "interrupted"
    # A huge answer: a JSON body with ``body_bytes`` of content, or a stream of
    # ``delta_bytes`` deltas that ends after ``body_bytes`` (0: never, until the client
    # goes away). Generated piece by piece: the fake itself stays small.
    FLOOD = "flood"
    # HTTP 200 whose answer fields are given verbatim (``fields``: ``content``,
    # ``finish_reason``, ``logprobs``, ``usage``, ``tool_calls``; any JSON, however out
    # of bounds), in one body or, streamed, in the chunks that carry them (a call's
    # arguments in two fragments). A field not given is what an ``ok`` answer has (no
    # logprobs, no tool calls).
    SCRIPTED = "scripted"


@dataclass(frozen=True, slots=True)
class Behaviour:
    """One way to answer a request; build it with the class methods."""

    kind: Kind = Kind.OK
    status: int = 200
    retry_after_s: float | None = None  # sent as ``Retry-After: <seconds>``
    retry_after_ms: float | None = None  # sent as ``retry-after-ms``
    retry_after_http_date: bool = False  # send ``retry_after_s`` as an HTTP-date instead
    latency_ms: float | None = None  # overrides the configured latency distribution
    answer: str | None = None  # overrides the answer policy (OK only)
    message: str | None = None  # the error body's ``error.message`` (STATUS only)
    finish_reason: str | None = None  # overrides "stop" / "length" (OK only)
    after_chunks: int = 1  # INTERRUPTED: events sent before the bare [DONE]
    body_bytes: int = 100 * 1024 * 1024  # FLOOD: content bytes (0: endless stream)
    delta_bytes: int = 60_000  # FLOOD: content bytes per streamed delta
    fields: Mapping[str, Any] | None = None  # SCRIPTED: the answer's fields, verbatim
    # Response headers added to an ok, scripted or error answer (rate-limit headers,
    # Retry-After, whatever a test wants the client to read), as (name, value) pairs.
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def ok(
        cls,
        *,
        answer: str | None = None,
        latency_ms: float | None = None,
        finish_reason: str | None = None,
    ) -> "Behaviour":
        return cls(Kind.OK, answer=answer, latency_ms=latency_ms, finish_reason=finish_reason)

    @classmethod
    def scripted(
        cls,
        *,
        headers: Mapping[str, str] | None = None,
        latency_ms: float | None = None,
        **fields: Any,
    ) -> "Behaviour":
        """A 200 answer whose ``fields`` (content, finish_reason, logprobs, usage) are
        sent verbatim, with ``headers``."""
        unknown = set(fields) - SCRIPTED_FIELDS
        if unknown:
            raise ValueError(f"scripted: unknown answer fields {sorted(unknown)}")
        return cls(
            Kind.SCRIPTED,
            fields=fields,
            headers=tuple((headers or {}).items()),
            latency_ms=latency_ms,
        )

    @classmethod
    def tool_calls(
        cls, *calls: tuple[str, Any], content: str | None = None, **fields: Any
    ) -> "Behaviour":
        """A 200 answer that calls ``(name, arguments)`` in order: arguments given as a
        string are sent as they are (malformed JSON, say), anything else as its JSON
        text, the way the OpenAI API encodes them. ``finish_reason`` is "tool_calls"."""
        wire = [
            {
                "id": f"call_{index}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments, ensure_ascii=False),
                },
            }
            for index, (name, arguments) in enumerate(calls)
        ]
        fields.setdefault("finish_reason", "tool_calls")
        return cls.scripted(content=content, tool_calls=wire, **fields)

    @classmethod
    def interrupted(cls, *, after_chunks: int = 1, answer: str | None = None) -> "Behaviour":
        """A stream that ends with ``[DONE]`` and no finish_reason after ``after_chunks``."""
        return cls(Kind.INTERRUPTED, after_chunks=after_chunks, answer=answer)

    @classmethod
    def flood(
        cls, *, body_bytes: int = 100 * 1024 * 1024, delta_bytes: int = 60_000
    ) -> "Behaviour":
        """``body_bytes`` of answer (0: an endless stream), in ``delta_bytes`` deltas."""
        return cls(Kind.FLOOD, body_bytes=body_bytes, delta_bytes=delta_bytes)

    @classmethod
    def error(
        cls,
        status: int,
        *,
        retry_after_s: float | None = None,
        retry_after_ms: float | None = None,
        retry_after_http_date: bool = False,
        message: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> "Behaviour":
        if not 400 <= status <= 599:
            raise ValueError(f"error status must be 4xx or 5xx, got {status}")
        return cls(
            Kind.STATUS,
            status=status,
            retry_after_s=retry_after_s,
            retry_after_ms=retry_after_ms,
            retry_after_http_date=retry_after_http_date,
            message=message,
            headers=tuple((headers or {}).items()),
        )

    @classmethod
    def rate_limited(
        cls,
        *,
        retry_after_s: float | None = None,
        retry_after_ms: float | None = None,
        retry_after_http_date: bool = False,
    ) -> "Behaviour":
        return cls.error(
            429,
            retry_after_s=retry_after_s,
            retry_after_ms=retry_after_ms,
            retry_after_http_date=retry_after_http_date,
        )

    @classmethod
    def hang(cls) -> "Behaviour":
        return cls(Kind.HANG)

    @classmethod
    def reset(cls) -> "Behaviour":
        return cls(Kind.RESET)

    @classmethod
    def malformed(cls) -> "Behaviour":
        return cls(Kind.MALFORMED)

    @property
    def label(self) -> str:
        """The journal's outcome name: ``ok``, ``http_503``, ``hang``, ``reset``, ``malformed``."""
        return f"http_{self.status}" if self.kind is Kind.STATUS else self.kind.value

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in _fields(self).items() if v != _DEFAULT_FIELDS[k]}
        if "headers" in data:
            data["headers"] = [list(pair) for pair in self.headers]
        return data | {"kind": self.kind.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Behaviour":
        unknown = set(data) - set(_DEFAULT_FIELDS)
        if unknown:
            raise ValueError(f"behaviour: unknown fields {sorted(unknown)}")
        values = dict(data)
        values["kind"] = Kind(values.get("kind", "ok"))
        values["headers"] = tuple((str(k), str(v)) for k, v in values.get("headers", ()))
        behaviour = cls(**values)
        if behaviour.kind is Kind.STATUS:
            cls.error(behaviour.status)  # validates the status range
        if behaviour.kind is Kind.SCRIPTED:
            cls.scripted(**dict(behaviour.fields or {}))  # validates the field names
        return behaviour


SCRIPTED_FIELDS = frozenset({"content", "finish_reason", "logprobs", "usage", "tool_calls"})


def _fields(behaviour: Behaviour) -> dict[str, Any]:
    return {f.name: getattr(behaviour, f.name) for f in dataclasses.fields(behaviour)}


_DEFAULT_FIELDS = _fields(Behaviour())


@dataclass(frozen=True, slots=True)
class FaultRate:
    """``behaviour`` is chosen for a share ``rate`` of the requests not scripted otherwise."""

    behaviour: Behaviour
    rate: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be in [0, 1], got {self.rate}")


@dataclass(frozen=True, slots=True)
class FakeConfig:
    """How the fake behaves; replace it at any time with ``FakeProvider.configure``."""

    latency_ms: float = 0.0  # the median (or the fixed value when latency_sigma is 0)
    latency_sigma: float = 0.0  # log-normal shape
    faults: tuple[FaultRate, ...] = ()
    sequence: tuple[Behaviour, ...] = ()
    per_key: Mapping[str, tuple[Behaviour, ...]] = field(default_factory=dict)
    per_prompt: Mapping[str, Behaviour] = field(default_factory=dict)
    answers: Mapping[str, str] = field(default_factory=dict)  # X-Evald-Subtask key → answer
    # Provider model name → the answer every request for that model gets (a judge's
    # verdict, say), after ``answers`` and before the answer callable.
    model_answers: Mapping[str, str] = field(default_factory=dict)
    hang_s: float = 600.0
    stream_chunk_ms: float = 0.0  # pause between SSE content chunks
    # llama-cpp-python's ``interrupt_requests``: a new chat request ends every stream in
    # progress with a bare ``[DONE]`` (no finish_reason).
    interrupt_streams: bool = False
    send_usage: bool = True  # False: no usage in answers, even when the client asks
    api_key: str | None = None  # when set, requests need ``Authorization: Bearer <api_key>``
    seed: int = 0
    # Rate limits (see ``_quota``): RPM/TPM per provider model name ("*": every model),
    # and a hidden cap on calls in flight per model, answered 429 above it.
    quotas: Mapping[str, Quota] = field(default_factory=dict)
    max_concurrent: int | None = None
    # /v1/completions' echo: "consistent", or "llama_cpp" (llama-cpp-python 0.3.36's
    # off-by-one, ``_completions.EchoMode``).
    echo_mode: str = "consistent"

    def __post_init__(self) -> None:
        if self.latency_ms < 0 or self.latency_sigma < 0 or self.hang_s < 0:
            raise ValueError("latency_ms, latency_sigma and hang_s must be >= 0")
        if sum(f.rate for f in self.faults) > 1.0 + 1e-9:
            raise ValueError("fault rates add up to more than 1")
        if self.echo_mode not in ("consistent", "llama_cpp"):
            raise ValueError(f"echo_mode: 'consistent' or 'llama_cpp', got {self.echo_mode!r}")
        if self.max_concurrent is not None and self.max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {self.max_concurrent}")

    def quota_for(self, model: str) -> Quota | None:
        return self.quotas.get(model) or self.quotas.get("*")

    def choose(self, arrival: int, key: str | None, attempt: int, prompt: str = "") -> Behaviour:
        """The behaviour for the ``arrival``-th request (0-based), ``attempt``-th of its
        key, whose last message is ``prompt``."""
        if key is not None:
            script = self.per_key.get(key)
            if script is not None and attempt < len(script):
                return script[attempt]
        for marker, behaviour in self.per_prompt.items():
            if marker in prompt:
                return behaviour
        if arrival < len(self.sequence):
            return self.sequence[arrival]
        if self.faults:
            u = self._uniform(arrival, key, attempt, "fault")
            for fault in self.faults:
                if u < fault.rate:
                    return fault.behaviour
                u -= fault.rate
        return _OK

    def latency_s(self, behaviour: Behaviour, arrival: int, key: str | None, attempt: int) -> float:
        if behaviour.latency_ms is not None:
            return behaviour.latency_ms / 1000.0
        if self.latency_ms <= 0:
            return 0.0
        if self.latency_sigma <= 0:
            return self.latency_ms / 1000.0
        z = _UNIT.inv_cdf(self._uniform(arrival, key, attempt, "latency"))
        return self.latency_ms / 1000.0 * math.exp(self.latency_sigma * z)

    def _uniform(self, arrival: int, key: str | None, attempt: int, purpose: str) -> float:
        who = f"k:{key}" if key is not None else f"n:{arrival}"
        digest = hashlib.blake2b(
            f"{self.seed}\x1f{who}\x1f{attempt}\x1f{purpose}".encode(), digest_size=8
        ).digest()
        return (int.from_bytes(digest, "big") + 0.5) / _TWO_64

    def to_json(self) -> dict[str, Any]:
        return {
            "latency_ms": self.latency_ms,
            "latency_sigma": self.latency_sigma,
            "faults": [{"rate": f.rate, "behaviour": f.behaviour.to_json()} for f in self.faults],
            "sequence": [b.to_json() for b in self.sequence],
            "per_key": {k: [b.to_json() for b in v] for k, v in self.per_key.items()},
            "per_prompt": {k: b.to_json() for k, b in self.per_prompt.items()},
            "answers": dict(self.answers),
            "model_answers": dict(self.model_answers),
            "hang_s": self.hang_s,
            "stream_chunk_ms": self.stream_chunk_ms,
            "interrupt_streams": self.interrupt_streams,
            "send_usage": self.send_usage,
            "api_key_set": self.api_key is not None,
            "seed": self.seed,
            "quotas": {m: q.to_json() for m, q in self.quotas.items()},
            "max_concurrent": self.max_concurrent,
            "echo_mode": self.echo_mode,
        }

    def updated(self, data: Mapping[str, Any]) -> "FakeConfig":
        """This config with the fields present in a JSON object replaced."""
        allowed = {f.name for f in dataclasses.fields(self)}
        unknown = set(data) - allowed
        if unknown:
            raise ValueError(f"config: unknown fields {sorted(unknown)}")
        changes: dict[str, Any] = {}
        for name, value in data.items():
            if name == "faults":
                changes[name] = tuple(
                    FaultRate(Behaviour.from_json(f["behaviour"]), float(f["rate"])) for f in value
                )
            elif name == "sequence":
                changes[name] = _behaviours(value)
            elif name == "per_key":
                changes[name] = {str(k): _behaviours(v) for k, v in value.items()}
            elif name == "per_prompt":
                changes[name] = {str(k): Behaviour.from_json(v) for k, v in value.items()}
            elif name == "quotas":
                changes[name] = {str(k): Quota.from_json(v) for k, v in value.items()}
            elif name in ("answers", "model_answers"):
                changes[name] = {str(k): str(v) for k, v in value.items()}
            else:
                changes[name] = value
        return dataclasses.replace(self, **changes)


def _behaviours(items: Sequence[Mapping[str, Any]]) -> tuple[Behaviour, ...]:
    return tuple(Behaviour.from_json(item) for item in items)


_OK = Behaviour()
