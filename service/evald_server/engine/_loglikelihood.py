"""One loglikelihood attempt: a call per choice of a multiple-choice record.

The record's prompt, as plain text (no chat template: ``ChatPrompt.plain_text``), is
the context; each choice's continuation is " " and its letter or its text
(``ChoiceContinuation``), lm-eval's target delimiter and ``doc_to_choice``. The calls
go one after the other inside the attempt, which holds one slot of each limit
throughout (so a model's ``max_concurrency`` bounds its calls in flight) and was
admitted by the model's request budget for all of them (``calls_for``).

The attempt succeeds when every call did; then the sample stores the continuations'
summed log-probabilities (``scoring.continuation_entries``) and its ``requests`` count
every call. One failed call fails the attempt as any failed call does (a retry asks
every choice again); an inconsistent echo is permanent and names the inconsistency.
"""

from collections.abc import Mapping
from typing import Any

from evald_server.datasets import choice_letter
from evald_server.domain import ChoiceContinuation
from evald_server.engine._cost import Pricing, call_cost
from evald_server.providers import (
    ContinuationRequest,
    LoglikelihoodProvider,
    RateLimitInfo,
)
from evald_server.scoring import continuation_entries
from evald_server.store import ClaimedSubtask


def continuations(fields: Mapping[str, Any], kind: ChoiceContinuation) -> list[str]:
    """The continuation of each choice of a record, in order."""
    choices = fields["choices"]
    if kind is ChoiceContinuation.TEXTS:
        return [f" {choice}" for choice in choices]
    return [f" {choice_letter(index)}" for index in range(len(choices))]


def calls_for(fields: Mapping[str, Any]) -> int:
    """The provider calls one attempt on this record makes."""
    return max(1, len(fields.get("choices") or ()))


class ChoiceCalls:
    """The calls of one attempt, made in order; ``made`` counts those sent so far."""

    def __init__(self, item: ClaimedSubtask, context: str, kind: ChoiceContinuation) -> None:
        self._item = item
        self._context = context
        self._continuations = continuations(item.fields, kind)
        self.made = 0
        self.rate_limits: RateLimitInfo | None = None

    async def run(
        self, provider: LoglikelihoodProvider, seed: int | None, pricing: Pricing | None
    ) -> dict[str, Any]:
        """The succeeded attempt's outcome fields; a failed call raises its failure."""
        logprobs: list[float] = []
        prompt_tokens: int | None = 0
        completion_tokens: int | None = 0
        latency_s = 0.0
        for index, continuation in enumerate(self._continuations):
            self.made += 1
            # Each call its own key (X-Evald-Subtask): a fake's journal tells a choice's
            # call from a repeated one.
            key = f"{self._item.subtask_id}#{index}"
            answer = await provider.loglikelihood(
                ContinuationRequest(self._context, continuation, key, seed)
            )
            self.rate_limits = answer.rate_limits or self.rate_limits
            logprobs.append(answer.logprob)
            latency_s += answer.latency_s
            prompt_tokens = _plus(prompt_tokens, answer.prompt_tokens)
            completion_tokens = _plus(completion_tokens, answer.completion_tokens)
        best = max(range(len(logprobs)), key=lambda i: (logprobs[i], -i))
        output = _summary(self._continuations, logprobs, best)
        prompt_chars = sum(len(self._context) + len(c) for c in self._continuations)
        return {
            "output": output,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "latency_s": latency_s,
            "top_logprobs": continuation_entries(self._continuations, logprobs),
            "finish_reason": "length",
            "cost": call_cost(
                pricing,
                prompt_tokens,
                completion_tokens,
                prompt_chars=prompt_chars,
                output=output,
            ),
            "calls": self.made,
        }


def _plus(total: int | None, count: int | None) -> int | None:
    return None if total is None or count is None else total + count


def _summary(continuations: list[str], logprobs: list[float], best: int) -> str:
    """What ListSamples shows as the answer: every continuation's log-likelihood."""
    listed = ", ".join(
        f"{c.strip()!r}: {v:.4f}" for c, v in zip(continuations, logprobs, strict=True)
    )
    return f"loglikelihood argmax {continuations[best].strip()!r} ({listed})"
