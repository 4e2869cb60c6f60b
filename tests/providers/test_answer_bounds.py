"""The numbers and text of a provider's answer, checked once against named bounds: at
the wire, in the simulator, and through the real service with the fake provider
scripting answers no real provider should send."""

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_client import AsyncEvaldClient, ChoiceScoring, SubtaskState
from evald_client import GenerationParams as RunGeneration
from evald_server.config import GenerationParams, ModelConfig
from evald_server.domain import ChatMessage
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate
from evald_server.providers import ProviderRequest, SimulatedProvider
from evald_server.providers._answer_bounds import (
    DEFAULT_CALL_TOKENS,
    AnswerBounds,
    checked_text,
    checked_usage,
)
from evald_server.providers._openai_wire import StreamAccumulator, parse_completion
from tests.harness import config_data, make_config, running_server

pytestmark = pytest.mark.anyio

BOUNDS = AnswerBounds(call_tokens=1000)


@pytest.mark.parametrize(
    ("usage", "counts"),
    [
        (None, (None, None)),
        ({"prompt_tokens": 12, "completion_tokens": 3}, (12, 3)),
        ({"prompt_tokens": 12}, (12, None)),  # partly reported is not a fault
        ({}, (None, None)),
        ({"prompt_tokens": 0, "completion_tokens": 0}, (0, 0)),
        ({"prompt_tokens": 999, "completion_tokens": 1}, (999, 1)),  # exactly the bound
    ],
)
def test_usage_within_bounds_is_kept(usage: Any, counts: tuple[int | None, int | None]) -> None:
    checked = checked_usage(usage, BOUNDS)
    assert (checked.prompt_tokens, checked.completion_tokens) == counts
    assert checked.flags == ()


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 10**30, "completion_tokens": 1},  # killed the server's committer
        {"prompt_tokens": 2**63, "completion_tokens": 1},
        {"prompt_tokens": 1000, "completion_tokens": 1},  # the sum over the call's bound
        {"prompt_tokens": 1, "completion_tokens": 1001},
        {"prompt_tokens": -1, "completion_tokens": 1},
        {"prompt_tokens": 5, "completion_tokens": 1.5},
        {"prompt_tokens": 5.0, "completion_tokens": 1},
        {"prompt_tokens": "5", "completion_tokens": 1},
        {"prompt_tokens": True, "completion_tokens": 1},
        {"prompt_tokens": [5], "completion_tokens": 1},
        {"prompt_tokens": 5, "completion_tokens": float("nan")},
        [5, 1],
        "lots",
        7,
    ],
)
def test_usage_beyond_bounds_is_unknown_and_flagged(usage: Any) -> None:
    checked = checked_usage(usage, BOUNDS)
    assert (checked.prompt_tokens, checked.completion_tokens) == (None, None)
    assert checked.flags == ("usage_invalid",)


def test_the_call_bound_is_the_models_context_or_the_default() -> None:
    plain = ModelConfig(id="m", provider="simulated")
    assert AnswerBounds.of(plain).call_tokens == DEFAULT_CALL_TOKENS
    sized = ModelConfig(id="m", provider="simulated", context_tokens=8192)
    assert AnswerBounds.of(sized).call_tokens == 8192
    assert checked_usage({"prompt_tokens": 8000, "completion_tokens": 193}, AnswerBounds.of(sized))
    assert checked_usage(
        {"prompt_tokens": 8000, "completion_tokens": 193}, AnswerBounds.of(sized)
    ).flags == ("usage_invalid",)


def test_lone_surrogates_in_text_are_repaired_and_flagged() -> None:
    assert checked_text("pos") == ("pos", ())
    assert checked_text("p\ud800o\udfffs") == ("p\ufffdo\ufffds", ("text_repaired",))
    assert checked_text("😀") == ("😀", ())  # a pair JSON decoded into one code point


def _completion(content: str = '"pos"', usage: str | None = None, logprobs: str = "") -> bytes:
    choice = f'{{"message":{{"content":{content}}},"finish_reason":"stop"{logprobs}}}'
    usage_part = "" if usage is None else f',"usage":{usage}'
    return f'{{"choices":[{choice}]{usage_part}}}'.encode()


def test_a_whole_answer_is_checked_once_at_the_wire() -> None:
    parsed = parse_completion(
        _completion(
            '"p\\ud800s"',
            '{"prompt_tokens":100000000000000000000000000000,"completion_tokens":1}',
            ',"logprobs":{"content":[{"token":"p","logprob":Infinity}]}',
        ),
        bounds=BOUNDS,
    )
    assert parsed.text == "p\ufffds"
    assert (parsed.prompt_tokens, parsed.completion_tokens, parsed.top_logprobs) == (None,) * 3
    assert parsed.flags == ("usage_invalid", "logprobs_invalid", "text_repaired")
    # The same body within bounds: nothing flagged.
    fine = parse_completion(_completion('"ps"', '{"prompt_tokens":3,"completion_tokens":1}'))
    assert (fine.prompt_tokens, fine.completion_tokens, fine.flags) == (3, 1, ())


def _chunk(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    return b"data: " + json.dumps({"choices": choices, **extra}).encode()


def test_a_stream_is_checked_once_it_ends_with_its_last_usage() -> None:
    stream = StreamAccumulator(bounds=BOUNDS)
    stream.feed(_chunk([{"delta": {"content": "p\ud800"}, "logprobs": None}]))
    stream.feed(_chunk([{"delta": {}, "finish_reason": "stop"}]))
    stream.feed(_chunk([], usage={"prompt_tokens": 5000, "completion_tokens": 1}))
    parsed = stream.result()
    assert parsed.text == "p\ufffd"
    assert parsed.prompt_tokens is None
    assert parsed.flags == ("usage_invalid", "text_repaired")
    stream = StreamAccumulator(bounds=BOUNDS)
    stream.feed(_chunk([{"delta": {"content": "p"}, "finish_reason": "stop"}]))
    stream.feed(_chunk([], usage={"prompt_tokens": 5000, "completion_tokens": 1}))
    stream.feed(_chunk([], usage={"prompt_tokens": 5, "completion_tokens": 1}))
    assert (stream.result().prompt_tokens, stream.result().flags) == (5, ())


async def test_the_simulator_passes_the_same_bounds() -> None:
    model = ModelConfig(
        id="sim",
        provider="simulated",
        context_tokens=4,
        simulator={"accuracy": 1.0, "latency_ms_median": 0.0},
    )
    provider = SimulatedProvider(model)

    def request(prompt: str, expected: str) -> ProviderRequest:
        return ProviderRequest(
            messages=(ChatMessage("user", prompt),),
            params=GenerationParams(),
            request_key="k",
            reference={"expected": expected},
        )

    within = await provider.complete(request("a b", "yes"))
    assert (within.prompt_tokens, within.completion_tokens, within.flags) == (2, 1, ())
    beyond = await provider.complete(request("a b c d e f", "y\ud800s"))
    assert (beyond.prompt_tokens, beyond.completion_tokens) == (None, None)
    assert beyond.text == "y\ufffds"
    assert beyond.flags == ("usage_invalid", "text_repaired")


RECORDS = [
    {"id": f"r{i}", "input": f"review {i}", "label": "pos", "choices": ["pos", "neg"]}
    for i in range(6)
]


async def _samples(
    tmp_path: Path, fake: FakeProvider, *, stream: bool, **run: Any
) -> tuple[list[Any], list[Any]]:
    model = {"id": "fake", "provider": "openai", "base_url": fake.base_url, "stream": stream}
    config = make_config(tmp_path, models=[model])
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="d", version="1.0.0", task_type="classification", records=RECORDS
        )
        created = await client.create_run(models=["fake"], datasets=[("d", "1.0.0")], **run)
        with anyio.fail_after(60):
            await client.wait(created.run_id)
        results = await client.results(created.run_id)
        samples = [s async for s in client.samples(created.run_id)]
        # The server still serves: one provider's answer never takes it down.
        assert [m.model_id for m in await client.list_models()] == ["fake"]
    return results, samples


@pytest.mark.parametrize("stream", [False, True])
async def test_usage_of_ten_to_the_thirty_tokens_is_unknown_flagged_and_the_server_stays_up(
    tmp_path: Path, stream: bool
) -> None:
    # What killed the whole server: an SQLite INTEGER bind of 10^30 in the committer.
    huge = Behaviour.scripted(usage={"prompt_tokens": 10**30, "completion_tokens": 10**30})
    async with FakeProvider(FakeConfig(faults=(FaultRate(huge, 1.0),))) as fake:
        (result,), samples = await _samples(tmp_path, fake, stream=stream)
    assert [s.state for s in samples] == [SubtaskState.SUCCEEDED] * len(RECORDS)
    assert {(s.prompt_tokens, s.completion_tokens) for s in samples} == {(None, None)}
    assert all("usage_invalid" in s.flags for s in samples)
    assert result.execution.samples_without_usage == len(RECORDS)
    assert result.execution.prompt_tokens is None


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_with_lone_surrogates_is_kept_repaired_and_flagged(
    tmp_path: Path, stream: bool
) -> None:
    # Before: the provider's text reached a UTF-8 encode and the sample failed as INTERNAL.
    broken = Behaviour.scripted(content="pos\ud800")
    async with FakeProvider(FakeConfig(faults=(FaultRate(broken, 1.0),))) as fake:
        (result,), samples = await _samples(tmp_path, fake, stream=stream)
    assert {(s.state, s.output) for s in samples} == {(SubtaskState.SUCCEEDED, "pos\ufffd")}
    assert all(s.flags[0] == "text_repaired" for s in samples)
    assert "accuracy" in result.metrics  # scored like any answer


MC = [
    {
        "id": f"q{i}",
        "question": f"question {i}?",
        "choices": ["w", "x", "y", "z"],
        "answer_index": 1,
    }
    for i in range(4)
]


@pytest.mark.parametrize("stream", [False, True])
async def test_logprobs_out_of_bounds_fall_back_to_the_text_and_are_flagged(
    tmp_path: Path, stream: bool
) -> None:
    # A log-probability of +3 for "A" would otherwise outweigh every real letter.
    block = {
        "content": [
            {"token": "A", "logprob": 3.0, "top_logprobs": [{"token": "A", "logprob": 3.0}]}
        ]
    }
    scripted = Behaviour.scripted(content="B", logprobs=block)
    async with FakeProvider(FakeConfig(faults=(FaultRate(scripted, 1.0),))) as fake:
        model = {"id": "fake", "provider": "openai", "base_url": fake.base_url, "stream": stream}
        config = make_config(tmp_path, models=[model])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="mc", version="1.0.0", task_type="multiple_choice", records=MC
            )
            run = await client.create_run(
                models=["fake"],
                datasets=[("mc", "1.0.0")],
                choice_scoring=ChoiceScoring.LOGPROBS,
                generation=RunGeneration(max_tokens=4),
            )
            await client.wait(run.run_id, timeout_s=60)
            (result,) = await client.results(run.run_id)
            samples = [s async for s in client.samples(run.run_id)]
    assert {s.state for s in samples} == {SubtaskState.SUCCEEDED}
    for sample in samples:
        assert "logprobs_invalid" in sample.flags
        assert "logprob_fallback" in sample.flags
    assert result.metrics["accuracy"] == 1.0  # read from the text "B", the right answer


def test_config_bounds_of_the_new_settings() -> None:
    from evald_server.config import ConfigError, parse_config

    for bad in ({"context_tokens": 0}, {"context_tokens": 2**31}, {"rate_limit_reset_cap_s": -1}):
        model = {"id": "m", "provider": "simulated", **bad}
        with pytest.raises(ConfigError, match=next(iter(bad))):
            parse_config(config_data(Path("/nonexistent"), models=[model]))
