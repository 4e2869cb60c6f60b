"""The provider port: what the engine needs from a model provider, and nothing more.

A provider turns one rendered prompt into one ``Completion`` or raises
``ProviderFailure``, whose ``decision`` tells the engine whether and when to retry.
Cancelling the awaiting task aborts the in-flight request (its connection is closed).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from evald_server.config import GenerationParams
from evald_server.domain import ChatMessage, ErrorReason, EvalError, ToolCall
from evald_server.providers._rate_limit_headers import RateLimitInfo


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """One model call.

    ``reference`` is the record's gold data; only the simulated provider may look at it.
    ``request_key`` identifies the subtask (sent as the ``X-Evald-Subtask`` header so a
    fake provider's journal can count duplicate requests for finished work).
    """

    messages: tuple[ChatMessage, ...]
    params: GenerationParams
    request_key: str
    reference: Mapping[str, Any] = field(default_factory=dict)
    # Ask for the first token's top alternatives with log-probabilities (None: don't).
    top_logprobs: int | None = None
    # The plain prompt format: this text goes to /v1/completions, no chat template (the
    # messages are kept for estimates and costs); None: the messages go to chat.
    prompt_text: str | None = None
    # The record's tools and tool_choice, its answer's JSON Schema: JSON text, sent as
    # they are (``datasets.request_extras``); None where the record has none.
    tools: str | None = None
    tool_choice: str | None = None
    json_schema: str | None = None


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer, within the bounds of ``_answer_bounds``. Token counts are ``None``
    when the provider reported no usage (or usage out of bounds); ``finish_reason`` is
    stop / length / content_filter / tool_calls / unknown; ``flags`` name what the
    provider sent outside its bounds (``usage_invalid``, ``logprobs_invalid``, ...)."""

    text: str
    latency_s: float
    ttft_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # The first token's (token, log-probability) alternatives; None when none came back.
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    finish_reason: str = "unknown"
    rate_limits: RateLimitInfo | None = None  # the provider's x-ratelimit-* headers
    flags: tuple[str, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()  # the calls the answer made (``_tool_calls``)


@dataclass(frozen=True, slots=True)
class ContinuationRequest:
    """One loglikelihood call: how likely ``continuation`` is after ``context``, read
    from the completions endpoint's echo (``providers._echo``)."""

    context: str
    continuation: str
    request_key: str
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ContinuationAnswer:
    """The continuation's summed log-probability over its ``tokens``, and the call's usage."""

    logprob: float
    tokens: int
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    rate_limits: RateLimitInfo | None = None


class RetryKind(StrEnum):
    TRANSIENT = "transient"
    RATE_LIMITED = "rate_limited"
    PERMANENT = "permanent"


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """How the engine should react to a failure: data, not control flow."""

    kind: RetryKind
    retry_after_s: float | None = None

    @property
    def retryable(self) -> bool:
        return self.kind is not RetryKind.PERMANENT


class ProviderFailure(Exception):
    """A model call failed; ``error`` is what gets stored, ``decision`` what happens next."""

    def __init__(
        self,
        reason: ErrorReason,
        message: str,
        decision: RetryDecision,
        *,
        http_status: int | None = None,
        latency_s: float | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.decision = decision
        self.http_status = http_status
        self.latency_s = latency_s
        self.metadata = dict(metadata or {})  # more ErrorInfo metadata (what was inconsistent)
        self.rate_limits: RateLimitInfo | None = None  # set from the response's headers

    @property
    def error(self) -> EvalError:
        metadata: dict[str, object] = dict(self.metadata)
        if self.http_status is not None:
            metadata["httpStatus"] = self.http_status
        if self.decision.retry_after_s is not None:
            metadata["retryAfterS"] = f"{self.decision.retry_after_s:g}"
        return EvalError.of(self.reason, self.message, **metadata)


class Provider(Protocol):
    """A model provider; one instance per configured model, shared by every run."""

    # Whether the provider is sent the record's gold data (``ProviderRequest.reference``):
    # only a simulator answers from it; for every other provider it is not even built.
    wants_reference: bool

    async def complete(self, request: ProviderRequest) -> Completion:
        """Run one call; raise ``ProviderFailure`` on any failure."""
        ...

    async def aclose(self) -> None:
        """Release connections; in-flight calls are aborted."""
        ...


class LoglikelihoodProvider(Provider, Protocol):
    """A provider that can also score a continuation (a model with ``completions``)."""

    async def loglikelihood(self, request: ContinuationRequest) -> ContinuationAnswer:
        """One call; raise ``ProviderFailure`` on any failure, an inconsistent echo
        included (permanent, PROVIDER_BAD_RESPONSE naming the inconsistency)."""
        ...
