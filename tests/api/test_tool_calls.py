"""Tool-call tasks end to end: the real server, the SDK and the fake provider answering
each record with a scripted tool call (correct, wrong name, wrong argument type,
malformed arguments JSON, an extra call, no call, calls in another order, a set-like
list), non-streamed and streamed.

Each sample's verdict is checked against the one worked out by hand below, and each
headline metric against its recomputation from the samples read back through
ListSamples (their outputs decoded and their stored counts summed)."""

import json
from pathlib import Path
from typing import Any

import pytest

from evald_client import AsyncEvaldClient, ResultStatus, SubtaskState, ToolCallPayload
from evald_server.fake_provider import Behaviour, FakeProvider
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather forecast of a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
PARIS = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}
# Each case: the record's expected calls, what the fake answers, and the verdict worked
# out by hand: (exact, argument accuracy, matched, made, expected, flags).
CASES: dict[str, tuple[list[dict[str, Any]], Behaviour, tuple[Any, ...]]] = {
    "correct": (
        [{**PARIS, "alternatives": {"days": [None]}}],
        Behaviour.tool_calls(("get_weather", {"city": " paris ", "days": 3.0})),
        (1.0, 1.0, 1, 1, 1, ()),
    ),
    "wrong-name": (
        [PARIS],
        Behaviour.tool_calls(("get_time", {"city": "Paris"})),
        (0.0, 0.0, 0, 1, 1, ("wrong_name",)),
    ),
    "wrong-type": (
        [PARIS],
        Behaviour.tool_calls(("get_weather", {"city": "Paris", "days": "3"})),
        (0.0, 0.5, 0, 1, 1, ("wrong_argument_type",)),
    ),
    "malformed": (
        [PARIS],
        Behaviour.tool_calls(("get_weather", '{"city": "Paris", "days": 3')),
        (0.0, 0.0, 0, 1, 1, ("malformed_arguments",)),
    ),
    "extra-call": (
        [PARIS],
        Behaviour.tool_calls(
            ("get_weather", {"city": "Paris", "days": 3}), ("get_time", {"city": "Paris"})
        ),
        (0.0, 1.0, 1, 2, 1, ("wrong_name", "extra_calls")),
    ),
    "no-call": (
        [PARIS],
        Behaviour.ok(answer="I cannot look that up."),
        (0.0, 0.0, 0, 0, 1, ("no_call", "missing_call")),
    ),
    "two-calls-reordered": (
        [PARIS, {"name": "get_weather", "arguments": {"city": "Oslo", "days": 1}}],
        Behaviour.tool_calls(
            ("get_weather", {"city": "Oslo", "days": 1}),
            ("get_weather", {"city": "Paris", "days": 3}),
        ),
        (1.0, 1.0, 2, 2, 2, ()),
    ),
    "set-like-list": (
        [{"name": "get_weather", "arguments": {"city": "Rome", "tags": ["rain", "wind"]}}],
        Behaviour.tool_calls(("get_weather", {"city": "Rome", "tags": ["Wind", "rain"]})),
        (1.0, 1.0, 1, 1, 1, ()),
    ),
    "none-expected": ([], Behaviour.ok(answer="No tool needed."), (1.0, 1.0, 0, 0, 0, ())),
}


def records() -> list[dict[str, Any]]:
    return [
        {
            "id": case,
            "input": f"[{case}] What is the weather like?",
            "tools": [WEATHER, TIME],
            "expected_calls": expected,
            "tool_choice": "auto",
        }
        for case, (expected, _, _) in CASES.items()
    ]


def recomputed(samples: list[Any]) -> dict[str, float]:
    """The headline metrics from the stored samples alone."""
    n = len(samples)
    matched = sum(s.scores["matched_calls"] for s in samples)
    made = sum(s.scores["calls_made"] for s in samples)
    expected = sum(s.scores["calls_expected"] for s in samples)
    precision, recall = matched / made, matched / expected
    return {
        "exact_match": sum(s.scores["exact_match"] for s in samples) / n,
        "argument_accuracy": sum(s.scores["argument_accuracy"] for s in samples) / n,
        "call_precision": precision,
        "call_recall": recall,
        "call_f1": 2 * precision * recall / (precision + recall),
    }


async def test_tool_calls_scored_per_sample_and_overall(tmp_path: Path) -> None:
    async with FakeProvider() as fake:
        fake.configure(per_prompt={f"[{case}]": answer for case, (_, answer, _) in CASES.items()})
        models = [
            fake.model_config("fake-plain").model_dump(mode="json"),
            fake.model_config("fake-streamed", stream=True).model_dump(mode="json"),
        ]
        config = make_config(tmp_path, models=models)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="tools", version="1.0.0", task_type="tool_call", records=records()
            )
            run = await client.create_run(
                models=["fake-plain", "fake-streamed"], datasets=[("tools", "1.0.0")]
            )
            await client.wait(run.run_id, timeout_s=60)
            results = {r.model.model_id: r for r in await client.results(run.run_id)}
            samples = [s async for s in client.samples(run.run_id)]
        sent = list(fake.journal.entries)

    # What was sent: the record's tools and tool_choice, as uploaded.
    assert len(sent) == 2 * len(CASES)
    for entry in sent:
        assert entry.request_extras == {"tools": [WEATHER, TIME], "tool_choice": "auto"}

    assert {s.state for s in samples} == {SubtaskState.SUCCEEDED}
    for model_id, result in results.items():
        assert result.status is ResultStatus.SUCCESS, model_id
        mine = [s for s in samples if s.model_id == model_id]
        assert len(mine) == len(CASES)
        for sample in mine:
            exact, arguments, matched, made, expected, flags = CASES[sample.record_id][2]
            scores = sample.scores
            got = (
                scores["exact_match"],
                scores["argument_accuracy"],
                scores["matched_calls"],
                scores["calls_made"],
                scores["calls_expected"],
                sample.flags,
            )
            assert got == (exact, arguments, matched, made, expected, flags), sample.record_id
            # The stored output is the calls the provider boundary parsed.
            stored = json.loads(sample.output)
            assert len(stored["tool_calls"]) == made
        again = recomputed(mine)
        assert {k: result.metrics[k] for k in again} == pytest.approx(again, abs=1e-12)
        # By hand: 4 exact of 9; 5 calls matched of 9 made and 9 expected.
        assert result.metrics["exact_match"] == pytest.approx(4 / 9)
        assert result.metrics["call_precision"] == pytest.approx(5 / 9)
        assert result.metrics["call_recall"] == pytest.approx(5 / 9)
        for metric, uncertainty in result.intervals.items():
            interval = uncertainty.bootstrap
            assert interval.lower <= result.metrics[metric] <= interval.upper, metric
        payload = result.payload
        assert isinstance(payload, ToolCallPayload)
        assert (payload.no_call, payload.malformed_arguments, payload.wrong_name) == (1, 1, 2)
        assert (payload.extra_calls, payload.wrong_argument_type) == (1, 1)
        assert (payload.calls_made, payload.calls_expected) == (9, 9)
    malformed = next(s for s in samples if s.record_id == "malformed")
    call = json.loads(malformed.output)["tool_calls"][0]
    assert call["arguments_text"] == '{"city": "Paris", "days": 3'
    assert call["malformed"].startswith("arguments are not JSON")


async def test_the_simulator_answers_tool_calls_and_json(tmp_path: Path) -> None:
    # A simulated model that is always right calls exactly what is expected, and answers
    # the reference JSON; one that is never right makes no call or a wrong one.
    models = [
        {"id": f"sim-{accuracy}", "provider": "simulated", "simulator": {"accuracy": accuracy}}
        for accuracy in (1.0, 0.0)
    ]
    person = {"type": "object", "properties": {"name": {"type": "string"}}}
    structured = [
        {
            "id": f"p{i}",
            "input": f"Name {i}?",
            "json_schema": person,
            "reference": {"name": f"N{i}"},
        }
        for i in range(3)
    ]
    config = make_config(tmp_path, models=models)
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="tools", version="1.0.0", task_type="tool_call", records=records()
        )
        await client.upload_dataset(
            name="json", version="1.0.0", task_type="structured_output", records=structured
        )
        run = await client.create_run(
            models=["sim-1.0", "sim-0.0"], datasets=[("tools", "1.0.0"), ("json", "1.0.0")]
        )
        await client.wait(run.run_id, timeout_s=60)
        metrics = {
            (r.model.model_id, r.benchmark.name): r.metrics
            for r in await client.results(run.run_id)
        }
    assert metrics["sim-1.0", "tools"]["exact_match"] == 1.0
    assert metrics["sim-1.0", "json"]["field_exact_match"] == 1.0
    assert metrics["sim-0.0", "tools"]["call_recall"] == 0.0
    assert metrics["sim-0.0", "json"]["json_valid_rate"] == 0.0
