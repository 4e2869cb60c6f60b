"""The response cache: a run that opts in gets complete answers it was given before
without calling the provider again.

An entry's key hashes everything that decides an answer: the provider model's identity
(provider, base URL, provider model name, and how it is asked for structured output
when not by the prompt alone), every effective generation parameter, the record's
tools, tool choice and answer schema where it has them, the full rendered messages
(for a judge call, whose data fence is random, the rubric's hash and the values it
frames), the repeat index and the judging round (so repeats still
sample). Its scope is the run's tenant, unless the operator shares that model's cache
across tenants (``[cache] shared_models``). Only complete successful answers are kept
(finish_reason "stop", not empty; an answer over the size cap already failed), never
log-probability answers, never a judge answer without a parseable verdict.

A hit is looked up when a page of subtasks is claimed, before it is buffered: it is a
subtask that succeeded without a provider call, holds no limit and no rate budget, and
never reaches the provider. A miss goes on as usual and fills the cache when it
succeeds (written after its outcome is committed).
"""

import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from evald_server.config import ModelConfig, ServerConfig
from evald_server.datasets import NO_EXTRAS, request_extras
from evald_server.domain import OutcomeKind, PromptFormat
from evald_server.engine._executor import TaskContext, context_key, messages_for, outcome_of
from evald_server.engine._judging import judged
from evald_server.store import (
    CachedAnswer,
    CacheEntry,
    ClaimedSubtask,
    Store,
    SubtaskOutcome,
)

CACHEABLE_FINISH = "stop"


@dataclass(frozen=True, slots=True)
class CacheSettings:
    ttl_s: float = 7 * 86_400.0
    max_entries: int = 100_000
    shared_models: frozenset[str] = frozenset()  # cache shared across tenants
    identities: Mapping[str, str] = field(default_factory=dict)  # model id → identity

    def scope(self, tenant: str, model_id: str) -> str:
        if model_id in self.shared_models:
            return f"model:{model_id}"
        return f"tenant:{tenant}"


def cache_settings(config: ServerConfig) -> CacheSettings:
    """The cache settings of a server: its [cache] section, and what identifies each
    model's answers (an API key is no part of it: it does not change the answer)."""
    return CacheSettings(
        ttl_s=config.cache.ttl_s,
        max_entries=config.cache.max_entries,
        shared_models=frozenset(config.cache.shared_models),
        identities={m.id: _identity(m) for m in config.models},
    )


def _identity(model: ModelConfig) -> str:
    parts = [model.provider, model.base_url or "", model.provider_model]
    if model.structured_output_format != "prompt":  # it changes the request (and answer)
        parts.append(model.structured_output_format)
    return json.dumps(parts)


def cache_key(settings: CacheSettings, item: ClaimedSubtask, ctx: TaskContext) -> str:
    body = {
        "model": settings.identities.get(item.model_id, f"id:{item.model_id}"),
        "params": ctx.params.model_dump(mode="json"),
        "messages": _request_text(item, ctx),
        "repeat_index": item.repeat_index,
        "judge_round": item.judge_round,
    }
    extras = NO_EXTRAS if ctx.judge is not None else request_extras(ctx.task_type, item.fields)
    if extras != NO_EXTRAS:  # a record's tools or schema decide its answer too
        body["extras"] = [extras.tools, extras.tool_choice, extras.json_schema]
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _request_text(item: ClaimedSubtask, ctx: TaskContext) -> object:
    """What a request says: its messages; for a judge call, whose data fence is drawn
    afresh for every prompt, what its messages are made of (the rubric's hash, which
    covers the framing around it, and each value it fences)."""
    if ctx.judge is not None:
        values = ctx.judge.values(item.fields, item.record_id, item.answer or "")
        return {"rubric_sha256": ctx.judge.spec.rubric_sha256(), "values": values}
    return [[m.role, m.content] for m in messages_for(item, ctx)]


def uses_cache(ctx: TaskContext) -> bool:
    # Log-probabilities (first token or loglikelihood) are not kept by the cache, and its
    # key is the chat messages: a plain prompt's answer is not cached either.
    return (
        ctx.cache_scope is not None
        and ctx.top_logprobs is None
        and ctx.continuation is None
        and ctx.prompt_format is PromptFormat.CHAT
    )


def cacheable(outcome: SubtaskOutcome) -> CachedAnswer | None:
    """What of a committed outcome may be kept: a complete answer from a provider."""
    if (
        outcome.kind is not OutcomeKind.SUCCEEDED
        or outcome.cache_hit
        or outcome.cache_key is None
        or not outcome.output
        or outcome.finish_reason != CACHEABLE_FINISH
    ):
        return None
    return CachedAnswer(
        outcome.output, outcome.finish_reason, outcome.prompt_tokens, outcome.completion_tokens
    )


class ResponseCache:
    def __init__(self, store: Store, settings: CacheSettings) -> None:
        self._store = store
        self.settings = settings
        self.hits = 0
        self.stored = 0
        self.evicted = 0

    async def answer(
        self,
        items: Sequence[ClaimedSubtask],
        contexts: Mapping[str, TaskContext],
        now: float,
    ) -> tuple[list[SubtaskOutcome], list[ClaimedSubtask]]:
        """Split a claimed page into outcomes answered from the cache and the rest."""
        keyed: dict[str, list[tuple[ClaimedSubtask, str]]] = {}
        rest: list[ClaimedSubtask] = []
        for item in items:
            ctx = contexts.get(context_key(item.task_id, item.phase))
            if ctx is None or not uses_cache(ctx):
                rest.append(item)
                continue
            assert ctx.cache_scope is not None
            keyed.setdefault(ctx.cache_scope, []).append(
                (item, cache_key(self.settings, item, ctx))
            )
        hits: list[SubtaskOutcome] = []
        for scope, pairs in keyed.items():
            found = await self._store.cache_lookup(
                scope, [key for _, key in pairs], now, self.settings.ttl_s
            )
            for item, key in pairs:
                answer = found.get(key)
                if answer is None:
                    rest.append(item)
                    continue
                hits.append(_hit(item, answer, contexts[context_key(item.task_id, item.phase)]))
        self.hits += len(hits)
        return hits, rest

    async def keep(
        self, outcomes: Sequence[SubtaskOutcome], contexts: Mapping[str, TaskContext]
    ) -> None:
        """Fill the cache with the complete answers of committed outcomes."""
        entries = []
        for outcome in outcomes:
            answer = cacheable(outcome)
            ctx = contexts.get(context_key(outcome.task_id, outcome.phase))
            if answer is None or ctx is None or ctx.cache_scope is None:
                continue
            assert outcome.cache_key is not None
            entries.append(CacheEntry(ctx.cache_scope, outcome.cache_key, answer))
        if not entries:
            return
        self.evicted += await self._store.cache_put(
            entries, time.time(), ttl_s=self.settings.ttl_s, max_entries=self.settings.max_entries
        )
        self.stored += len(entries)


def _hit(item: ClaimedSubtask, answer: CachedAnswer, ctx: TaskContext) -> SubtaskOutcome:
    outcome = outcome_of(
        item,
        OutcomeKind.SUCCEEDED,
        attempted=False,
        output=answer.output,
        finish_reason=answer.finish_reason,
        cache_hit=True,
    )
    return outcome if ctx.judge is None else judged(outcome, item, ctx.judge.spec)
