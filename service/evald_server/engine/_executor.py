"""One model call: render the prompt, call the provider, turn what happened into an outcome.

The outcome is data for the store (``SubtaskOutcome``); nothing here raises for a
failed call. A provider that raises something other than ``ProviderFailure`` has a bug:
it is logged with its traceback and the subtask fails permanently with INTERNAL_ERROR,
without taking the engine down.
"""

import dataclasses
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from evald_server.config import GenerationParams
from evald_server.datasets import NO_EXTRAS, ChatPrompt, request_extras, simulator_reference
from evald_server.domain import (
    ChatMessage,
    ChoiceContinuation,
    ErrorReason,
    EvalError,
    OutcomeKind,
    PromptFormat,
    SubtaskPhase,
    TaskType,
    encode_tool_answer,
)
from evald_server.engine._cost import Pricing, call_cost
from evald_server.engine._judging import JudgePrompt, judged
from evald_server.engine._loglikelihood import ChoiceCalls
from evald_server.engine._retry_policy import RetryPolicy, retry_class
from evald_server.providers import (
    LoglikelihoodProvider,
    Provider,
    ProviderFailure,
    ProviderRequest,
    RateLimitInfo,
    RetryKind,
)
from evald_server.store import ClaimedSubtask, SubtaskOutcome

_log = logging.getLogger(__name__)
# Alternatives asked for with log-probability scoring: the most the OpenAI API returns.
TOP_LOGPROBS = 20


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What every call of one task needs, loaded once per task."""

    task_id: str
    run_id: str
    model_id: str
    task_type: TaskType
    prompt: ChatPrompt  # template, system message and k-shot examples
    params: GenerationParams
    policy: RetryPolicy
    top_logprobs: int | None = None  # ask for log-probabilities (choice scoring LOGPROBS)
    # Loglikelihood scoring (a call per choice, ``_loglikelihood``): the continuations.
    continuation: ChoiceContinuation | None = None
    # PLAIN: the prompt's text goes to the completions endpoint, without a chat template.
    prompt_format: PromptFormat = PromptFormat.CHAT
    pricing: Pricing | None = None  # the task's model price; None: cost unknown
    judge: JudgePrompt | None = None  # a task's judge phase: the rubric and score format
    cache_scope: str | None = None  # the response cache's scope; None: the run uses none


def context_key(task_id: str, phase: SubtaskPhase) -> str:
    """Where a subtask's TaskContext is kept: a task's judge phase has its own."""
    return task_id if phase is SubtaskPhase.ANSWER else f"{task_id}/judge"


def messages_for(item: ClaimedSubtask, ctx: TaskContext) -> tuple[ChatMessage, ...]:
    """The messages a subtask sends: its record's prompt, or the judge's rubric over
    the answer it grades."""
    if ctx.judge is not None:
        return ctx.judge.render(item.fields, item.record_id, item.answer or "")
    return ctx.prompt.render(item.fields, item.record_id)


def outcome_of(item: ClaimedSubtask, kind: OutcomeKind, **fields: object) -> SubtaskOutcome:
    """An outcome of ``item`` (its identity copied), with ``fields`` set."""
    return SubtaskOutcome(
        row_id=item.row_id,
        run_id=item.run_id,
        task_id=item.task_id,
        model_id=item.model_id,
        record_idx=item.record_idx,
        repeat_index=item.repeat_index,
        kind=kind,
        phase=item.phase,
        judge_round=item.judge_round,
        **fields,  # type: ignore[arg-type]
    )


async def call_model(
    item: ClaimedSubtask,
    ctx: TaskContext,
    provider: Provider,
    rng: random.Random,
    *,
    reference: bool = True,
    on_rate_limits: Callable[[RateLimitInfo], None] | None = None,
) -> SubtaskOutcome:
    """Run one attempt of ``item``; cancellation propagates (the caller records it).
    ``on_rate_limits`` sees the provider's rate-limit headers, answer or failure."""
    started = time.perf_counter()
    messages: tuple[ChatMessage, ...] = ()
    calls: ChoiceCalls | None = None
    try:
        if ctx.continuation is not None:
            context = ctx.prompt.plain_text(item.fields, item.record_id)
            calls = ChoiceCalls(item, context, ctx.continuation)
            fields = await calls.run(
                cast(LoglikelihoodProvider, provider), ctx.params.seed, ctx.pricing
            )
            if on_rate_limits is not None and calls.rate_limits is not None:
                on_rate_limits(calls.rate_limits)
            call_time_s = time.perf_counter() - started
            return outcome_of(item, OutcomeKind.SUCCEEDED, call_time_s=call_time_s, **fields)
        messages = messages_for(item, ctx)
        # A judge grades the answer as text: the record's tools or schema are not its.
        extras = NO_EXTRAS if ctx.judge is not None else request_extras(ctx.task_type, item.fields)
        request = ProviderRequest(
            messages=messages,
            params=ctx.params,
            request_key=item.subtask_id,
            reference=_reference(item, ctx) if reference else {},
            top_logprobs=ctx.top_logprobs,
            prompt_text=ctx.prompt.plain_text(item.fields, item.record_id)
            if ctx.prompt_format is PromptFormat.PLAIN and ctx.judge is None
            else None,
            tools=extras.tools,
            tool_choice=extras.tool_choice,
            json_schema=extras.json_schema,
        )
        completion = await provider.complete(request)
    except ProviderFailure as failure:
        if on_rate_limits is not None and failure.rate_limits is not None:
            on_rate_limits(failure.rate_limits)
        outcome = failed(item, ctx, failure, time.perf_counter() - started, rng)
        return outcome if calls is None else dataclasses.replace(outcome, calls=calls.made)
    except Exception as exc:  # a bug below us: keep the engine running, keep the evidence
        _log.exception("model call for subtask %s raised", item.subtask_id)
        error = EvalError.of(
            ErrorReason.INTERNAL_ERROR,
            f"internal error calling model {ctx.model_id}: {type(exc).__name__}",
        )
        call_time = time.perf_counter() - started
        return outcome_of(
            item,
            OutcomeKind.FAILED_PERMANENT,
            error=error,
            call_time_s=call_time,
            calls=1 if calls is None else max(calls.made, 1),
        )
    if on_rate_limits is not None and completion.rate_limits is not None:
        on_rate_limits(completion.rate_limits)
    output = completion.text
    if ctx.task_type is TaskType.TOOL_CALL and ctx.judge is None:
        # A tool-call answer is its calls: stored with the content as one JSON text.
        output = encode_tool_answer(completion.text, completion.tool_calls)
    outcome = outcome_of(
        item,
        OutcomeKind.SUCCEEDED,
        output=output,
        prompt_tokens=completion.prompt_tokens,
        completion_tokens=completion.completion_tokens,
        latency_s=completion.latency_s,
        ttft_s=completion.ttft_s,
        call_time_s=time.perf_counter() - started,
        # Asked and none came back is stored as empty: the scorer counts the fallback.
        top_logprobs=None if ctx.top_logprobs is None else (completion.top_logprobs or ()),
        finish_reason=completion.finish_reason,
        answer_flags=completion.flags,
        cost=call_cost(
            ctx.pricing,
            completion.prompt_tokens,
            completion.completion_tokens,
            prompt_chars=sum(len(m.content) for m in messages),
            output=completion.text,
        ),
    )
    return outcome if ctx.judge is None else judged(outcome, item, ctx.judge.spec)


def _reference(item: ClaimedSubtask, ctx: TaskContext) -> dict[str, object]:
    if ctx.judge is not None:
        return ctx.judge.simulated_reference()
    return simulator_reference(ctx.task_type, item.fields)


def failed(
    item: ClaimedSubtask,
    ctx: TaskContext,
    failure: ProviderFailure,
    call_time_s: float,
    rng: random.Random,
) -> SubtaskOutcome:
    """A failed attempt: a durable retry time, or ``failed_permanent``."""
    attempts = item.attempt + 1
    decision = failure.decision
    rate_limited = decision.kind is RetryKind.RATE_LIMITED
    failed_class = retry_class(failure)
    counts = item.failures if failed_class is None else item.failures.plus(failed_class)
    if not ctx.policy.should_retry(failed_class, counts):
        return outcome_of(
            item,
            OutcomeKind.FAILED_PERMANENT,
            error=failure.error,
            call_time_s=call_time_s,
            rate_limited=rate_limited,
            retry_class=failed_class,
        )
    delay = ctx.policy.delay_s(attempts, decision, rng)
    return outcome_of(
        item,
        OutcomeKind.RETRY,
        error=failure.error,
        next_attempt_at=time.time() + delay,
        call_time_s=call_time_s,
        rate_limited=rate_limited,
        retry_class=failed_class,
    )


def aborted(
    item: ClaimedSubtask, *, attempted: bool, release: bool, call_time_s: float
) -> SubtaskOutcome:
    """An attempt stopped by us: cancelled with its run, or released by a drain (pending
    again, no retry spent)."""
    kind = OutcomeKind.RELEASED if release else OutcomeKind.CANCELLED
    return outcome_of(item, kind, attempted=attempted, call_time_s=call_time_s)
