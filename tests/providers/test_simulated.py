"""The simulator: deterministic, calibrated accuracy and fault rate, retries can succeed."""

import dataclasses
import math
import statistics
from typing import Any

import anyio
import pytest

from evald_server.config import ModelConfig, SimulatorSettings
from evald_server.domain import ChatMessage, ErrorReason
from evald_server.providers import (
    OpenAIProvider,
    ProviderFailure,
    ProviderRequest,
    RetryKind,
    SimulatedProvider,
    build_provider,
)
from evald_server.providers._simulated import perturb

from .conftest import make_request

pytestmark = pytest.mark.anyio

N = 2_000


def _model(**settings: Any) -> ModelConfig:
    defaults: dict[str, Any] = {"latency_ms_median": 0.0}
    return ModelConfig(
        id="sim-1",
        provider="simulated",
        simulator=SimulatorSettings(**{**defaults, **settings}),
    )


def _reference(index: int, distractors: int = 2) -> dict[str, Any]:
    return {
        "expected": f"answer {index}",
        "distractors": [f"wrong {index}.{d}" for d in range(distractors)],
    }


def _request(index: int, **reference: Any) -> ProviderRequest:
    return ProviderRequest(
        messages=(ChatMessage("user", f"question number {index}"),),
        params=make_request("x").params,
        request_key=f"run-1/task-1/record-{index}/0",
        reference=reference or _reference(index),
    )


def _tolerance(p: float, n: int) -> float:
    """Five binomial standard deviations: a correct simulator fails this ~1 in 3.5 million."""
    return 5 * math.sqrt(p * (1 - p) / n)


async def test_same_seed_same_answers_other_seed_other_answers() -> None:
    first = SimulatedProvider(_model(accuracy=0.5, seed=1))
    again = SimulatedProvider(_model(accuracy=0.5, seed=1))
    other = SimulatedProvider(_model(accuracy=0.5, seed=2))
    a = [(await first.complete(_request(i))).text for i in range(200)]
    b = [(await again.complete(_request(i))).text for i in range(200)]
    c = [(await other.complete(_request(i))).text for i in range(200)]
    assert a == b
    assert a != c
    # The same call repeated answers the same (the answer does not depend on the attempt).
    assert (await first.complete(_request(7))).text == a[7]


async def test_accuracy_is_calibrated_and_wrong_answers_are_distractors() -> None:
    accuracy = 0.7
    provider = build_provider(_model(accuracy=accuracy, seed=11))
    right = 0
    for index in range(N):
        reference = _reference(index)
        completion = await provider.complete(_request(index))
        if completion.text == reference["expected"]:
            right += 1
        else:
            assert completion.text in reference["distractors"]
        assert completion.completion_tokens == len(completion.text.split())
        assert completion.prompt_tokens == 3
        assert completion.ttft_s is not None
        assert completion.ttft_s <= completion.latency_s
    assert abs(right / N - accuracy) <= _tolerance(accuracy, N)


@pytest.mark.parametrize("accuracy", [0.0, 1.0])
async def test_extreme_accuracies(accuracy: float) -> None:
    provider = SimulatedProvider(_model(accuracy=accuracy))
    texts = [(await provider.complete(_request(i))).text for i in range(100)]
    assert all((text == f"answer {i}") is (accuracy == 1.0) for i, text in enumerate(texts))


async def test_without_distractors_the_wrong_answer_is_a_perturbation() -> None:
    provider = SimulatedProvider(_model(accuracy=0.0))
    for index in range(50):
        expected = f"the tower of number {index}"
        text = (await provider.complete(_request(index, expected=expected))).text
        assert text != expected
        assert text.split() != expected.split()
    # A distractor equal to the answer is ignored, not counted as a wrong answer.
    text = (await provider.complete(_request(1, expected="x", distractors=["x"]))).text
    assert text == "not x"


@pytest.mark.parametrize("expected", ["Paris", "the Eiffel Tower", "a an of", "", "  "])
def test_perturb_always_differs(expected: str) -> None:
    for pick in (0.0, 0.3, 0.99):
        assert perturb(expected, pick) != expected


async def test_missing_expected_gives_a_stable_placeholder() -> None:
    provider = SimulatedProvider(_model(accuracy=1.0))
    request = make_request("no-reference")
    first = (await provider.complete(request)).text
    assert first == (await provider.complete(request)).text
    assert first.startswith("simulated answer")


@pytest.mark.parametrize(
    "reference",
    [{"expected": 3}, {"expected": "a", "distractors": "b"}, {"expected": "a", "distractors": [1]}],
)
async def test_bad_reference_is_a_clear_error(reference: dict[str, Any]) -> None:
    provider = SimulatedProvider(_model(accuracy=0.0))
    with pytest.raises(ValueError, match=r"reference\['(expected|distractors)'\]"):
        await provider.complete(_request(1, **reference))


async def test_fault_rate_and_faulted_keys_succeed_on_a_later_attempt() -> None:
    rate = 0.3
    provider = SimulatedProvider(_model(fault_rate=rate, seed=5))
    faulted: list[int] = []
    failures: list[ProviderFailure] = []
    for index in range(N):
        try:
            await provider.complete(_request(index))
        except ProviderFailure as failure:
            failures.append(failure)
            faulted.append(index)
    assert {(f.reason, f.decision.kind, f.http_status) for f in failures} == {
        (ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT, 503)
    }
    assert abs(len(faulted) / N - rate) <= _tolerance(rate, N)
    # Every faulted subtask gets through within a few retries (0.3**20 is ~3.5e-11).
    for index in faulted:
        for _attempt in range(20):
            try:
                await provider.complete(_request(index))
                break
            except ProviderFailure:
                continue
        else:
            pytest.fail(f"record {index} never succeeded")
    # Streaks are forgotten once a key succeeds: memory does not grow with the run.
    assert provider._fault_streaks == {}


async def test_fault_sequence_is_deterministic_per_key() -> None:
    async def outcomes(provider: SimulatedProvider) -> list[bool]:
        result = []
        for _attempt in range(5):
            try:
                await provider.complete(_request(3))
                result.append(True)
            except ProviderFailure:
                result.append(False)
        return result

    first = await outcomes(SimulatedProvider(_model(fault_rate=0.5, seed=9)))
    second = await outcomes(SimulatedProvider(_model(fault_rate=0.5, seed=9)))
    assert first == second


def test_latency_is_log_normal_around_the_median() -> None:
    provider = SimulatedProvider(_model(latency_ms_median=40.0, latency_sigma=0.5))
    draws = [provider.latency_s(f"key-{i}") for i in range(N)]
    logs = [math.log(d) for d in draws]
    # The median of N log-normal draws: standard error ~ 1.25 * sigma / sqrt(N) in log space.
    assert abs(statistics.median(logs) - math.log(0.040)) <= 5 * 1.25 * 0.5 / math.sqrt(N)
    assert statistics.stdev(logs) == pytest.approx(0.5, rel=0.1)
    assert draws == [provider.latency_s(f"key-{i}") for i in range(N)]
    flat = SimulatedProvider(_model(latency_ms_median=40.0, latency_sigma=0.0))
    assert {flat.latency_s(f"key-{i}") for i in range(10)} == {0.040}


async def test_the_call_takes_its_drawn_latency() -> None:
    provider = SimulatedProvider(_model(latency_ms_median=20.0, latency_sigma=0.3))
    request = _request(1)
    completion = await provider.complete(request)
    assert completion.latency_s >= provider.latency_s(request.request_key)


async def test_cancellation_interrupts_the_simulated_latency() -> None:
    provider = SimulatedProvider(_model(latency_ms_median=60_000.0))
    with anyio.move_on_after(0.05) as scope:
        await provider.complete(_request(1))
    assert scope.cancelled_caught


def test_repr_says_it_is_a_simulator() -> None:
    text = repr(SimulatedProvider(_model(accuracy=0.8)))
    assert text.startswith("SimulatedProvider(model_id='sim-1', accuracy=0.8")


async def test_log_probabilities_only_when_asked_its_first_word() -> None:
    provider = SimulatedProvider(_model(accuracy=1.0))
    letter = {"expected": "C", "distractors": ["A", "B", "D"]}
    plain = await provider.complete(_request(1, **letter))
    assert plain.top_logprobs is None
    asked = await provider.complete(dataclasses.replace(_request(1, **letter), top_logprobs=20))
    assert asked.text == "C"
    assert asked.top_logprobs == (("C", pytest.approx(math.log(0.9))),)


def test_only_the_simulator_asks_for_the_records_gold_data() -> None:
    assert SimulatedProvider.wants_reference is True
    assert OpenAIProvider.wants_reference is False
