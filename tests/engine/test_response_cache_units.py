"""The response cache's parts, pure or on a real SQLite file: what identifies a model's
answers (never its API key, always its base URL), what the key covers, what may be
kept, which scope an entry lives in, and a page split into hits and the rest."""

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from evald_server.config import GenerationParams, parse_config
from evald_server.datasets import ChatPrompt
from evald_server.domain import OutcomeKind, SubtaskPhase, TaskType
from evald_server.engine._executor import TaskContext, context_key
from evald_server.engine._response_cache import (
    CACHEABLE_FINISH,
    CacheSettings,
    ResponseCache,
    cache_key,
    cache_settings,
    cacheable,
    uses_cache,
)
from evald_server.engine._retry_policy import RetryPolicy
from evald_server.store import CachedAnswer, ClaimedSubtask, SqliteStore, SubtaskOutcome
from tests.harness import config_data

MODEL = {"id": "m1", "provider": "openai", "base_url": "http://a.example/v1", "model": "gpt"}


def _settings(tmp_path: Path, **model: Any) -> CacheSettings:
    data = config_data(tmp_path, models=[{**MODEL, **model}])
    data["cache"] = {"ttl_s": 60.0, "max_entries": 5, "shared_models": ["m1"]}
    return cache_settings(parse_config(data))


def _item(record_idx: int = 0, **changes: Any) -> ClaimedSubtask:
    item = ClaimedSubtask(
        row_id=record_idx + 1,
        run_id="run",
        task_id="task",
        model_id="m1",
        record_idx=record_idx,
        repeat_index=0,
        attempt=0,
        record_id=f"r{record_idx}",
        fields={"input": f"review {record_idx}", "label": "pos", "choices": ["pos", "neg"]},
        dataset_id="ds",
    )
    return dataclasses.replace(item, **changes)


def _ctx(**changes: Any) -> TaskContext:
    ctx = TaskContext(
        task_id="task",
        run_id="run",
        model_id="m1",
        task_type=TaskType.CLASSIFICATION,
        prompt=ChatPrompt(TaskType.CLASSIFICATION),
        params=GenerationParams(temperature=0.0),
        policy=RetryPolicy(),
        cache_scope="tenant:t1",
    )
    return dataclasses.replace(ctx, **changes)


def test_a_models_identity_is_its_provider_base_url_and_name_never_its_key(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)
    assert settings.identities == {"m1": '["openai", "http://a.example/v1", "gpt"]'}
    assert (settings.ttl_s, settings.max_entries) == (60.0, 5)
    assert settings.shared_models == frozenset({"m1"})
    keyed = _settings(tmp_path, api_key_env="HOME")  # any set variable
    assert keyed.identities == settings.identities
    simulated = cache_settings(
        parse_config(config_data(tmp_path, models=[{"id": "s", "provider": "simulated"}]))
    )
    assert simulated.identities == {"s": '["simulated", "", "s"]'}


def test_the_key_changes_with_everything_that_decides_an_answer(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    item, ctx = _item(), _ctx()
    key = cache_key(settings, item, ctx)
    assert len(key) == 64
    assert cache_key(settings, item, ctx) == key  # stable
    assert cache_key(_settings(tmp_path), _item(), _ctx()) == key  # across processes
    different = [
        cache_key(_settings(tmp_path, base_url="http://b.example/v1"), item, ctx),
        cache_key(_settings(tmp_path, model="gpt-2"), item, ctx),
        cache_key(CacheSettings(), item, ctx),  # unknown model: keyed by its id
        cache_key(settings, _item(1), ctx),  # another record: other messages
        cache_key(settings, _item(repeat_index=1), ctx),
        cache_key(settings, _item(judge_round=1), ctx),
        cache_key(settings, item, _ctx(params=GenerationParams(temperature=0.5))),
        cache_key(settings, item, _ctx(params=GenerationParams(temperature=0.0, seed=1))),
    ]
    assert len({key, *different}) == 1 + len(different)
    # What decides no answer is no part of it: the row, the attempt, the run.
    assert cache_key(settings, _item(row_id=99, attempt=3, run_id="other"), ctx) == key


def test_a_records_tools_and_schema_and_the_models_schema_format_are_in_the_key(
    tmp_path: Path,
) -> None:
    settings = _settings(tmp_path)
    tools = [{"type": "function", "function": {"name": "f"}}]
    fields = {"input": "same prompt", "tools": tools, "expected_calls": []}
    tool_ctx = _ctx(task_type=TaskType.TOOL_CALL, prompt=ChatPrompt(TaskType.TOOL_CALL))
    key = cache_key(settings, _item(fields=fields), tool_ctx)
    other_tools = [{"type": "function", "function": {"name": "g"}}]
    schema = {"input": "same prompt", "json_schema": {"type": "object"}}
    json_ctx = _ctx(
        task_type=TaskType.STRUCTURED_OUTPUT,
        prompt=ChatPrompt(TaskType.STRUCTURED_OUTPUT, "{input}"),  # the schema not shown
    )
    json_key = cache_key(settings, _item(fields=schema), json_ctx)
    keys = {
        key,
        cache_key(settings, _item(fields={**fields, "tools": other_tools}), tool_ctx),
        cache_key(settings, _item(fields={**fields, "tool_choice": "required"}), tool_ctx),
        json_key,
        cache_key(settings, _item(fields={**schema, "json_schema": {"type": "array"}}), json_ctx),
        cache_key(
            _settings(tmp_path, structured_output_format="json_object"),
            _item(fields=schema),
            json_ctx,
        ),
    }
    assert len(keys) == 6


def test_the_scope_is_the_tenant_unless_the_model_is_shared() -> None:
    settings = CacheSettings(shared_models=frozenset({"shared"}))
    assert settings.scope("t1", "shared") == "model:shared"
    assert settings.scope("t1", "own") == "tenant:t1"
    assert settings.scope("t2", "own") == "tenant:t2"


def test_runs_without_a_scope_or_scoring_by_logprobs_use_no_cache() -> None:
    assert uses_cache(_ctx())
    assert not uses_cache(_ctx(cache_scope=None))
    assert not uses_cache(_ctx(top_logprobs=20))


def _answer(**fields: Any) -> SubtaskOutcome:
    values: dict[str, Any] = {
        "output": "pos",
        "finish_reason": CACHEABLE_FINISH,
        "cache_key": "k",
        "prompt_tokens": 3,
        "completion_tokens": 1,
        **fields,
    }
    kind = values.pop("kind", OutcomeKind.SUCCEEDED)
    return SubtaskOutcome(1, "run", "task", "m1", 0, 0, kind, **values)


def test_only_complete_answers_from_a_provider_are_kept() -> None:
    assert CACHEABLE_FINISH == "stop"
    assert cacheable(_answer()) == CachedAnswer("pos", "stop", 3, 1)
    for refused in (
        _answer(kind=OutcomeKind.FAILED_PERMANENT),
        _answer(cache_hit=True),
        _answer(cache_key=None),
        _answer(output=""),
        _answer(output=None),
        _answer(finish_reason="length"),
        _answer(finish_reason=None),
    ):
        assert cacheable(refused) is None, refused


@pytest.mark.anyio
async def test_a_page_is_split_into_hits_and_the_rest_and_answers_are_kept(
    tmp_path: Path,
) -> None:
    store = await SqliteStore.open(tmp_path / "evald.sqlite3")
    try:
        settings = _settings(tmp_path)
        cache = ResponseCache(store, settings)
        ctx = _ctx()
        judge_ctx = _ctx(cache_scope=None)
        contexts = {
            context_key("task", SubtaskPhase.ANSWER): ctx,
            context_key("task", SubtaskPhase.JUDGE): judge_ctx,
        }
        items = [_item(0), _item(1), _item(2, task_id="unknown")]
        hits, rest = await cache.answer(items, contexts, now=1000.0)
        assert (hits, cache.hits) == ([], 0)
        assert [r.row_id for r in rest] == [3, 1, 2]  # without a cache first, then misses
        first_key = cache_key(settings, items[0], ctx)
        await cache.keep(
            [
                _answer(cache_key=first_key, output="neg"),
                _answer(cache_key="k2", finish_reason="length"),  # not kept
                dataclasses.replace(_answer(cache_key="k3"), task_id="unknown"),  # no context
            ],
            contexts,
        )
        assert cache.stored == 1
        hits, rest = await cache.answer(items, contexts, now=1000.0)
        assert [h.row_id for h in hits] == [1]
        assert [r.row_id for r in rest] == [3, 2]
        (hit,) = hits
        assert (hit.kind, hit.output, hit.finish_reason) == (OutcomeKind.SUCCEEDED, "neg", "stop")
        assert (hit.cache_hit, hit.attempted) == (True, False)
        assert cache.hits == 1
        await cache.keep([], contexts)  # nothing to keep: no write
        assert cache.stored == 1
    finally:
        await store.close()
