"""Loglikelihood multiple choice (lm-evaluation-harness' method) through the real server:
the fake provider's /v1/completions serves echoed log-probabilities from a table, and
acc, acc_norm and acc_bytes equal the values computed here by hand; the fake's
llama-cpp-python mode fails every sample with the provider inconsistency named; the
calls count against the model's limit and in the execution profile."""

from pathlib import Path
from typing import Any

import pytest

from evald_client import (
    AsyncEvaldClient,
    ChoiceContinuation,
    ChoiceScoring,
    DatasetOptions,
    DatasetRef,
    InvalidArgument,
    JudgeOptions,
    PromptFormat,
    SubtaskState,
)
from evald_server.fake_provider import FakeChatRequest, FakeConfig, FakeProvider, Quota
from tests.harness import make_config, running_server

pytestmark = pytest.mark.anyio

# The log-probability of each continuation token after each question (its record's
# marker is in the prompt); every other token gets -7, which no sum below reads.
# fmt: off
TABLE: dict[tuple[str, str], float] = {
    # Letters: acc picks the largest sum; all lengths are 1, so acc_norm = acc.
    ("Q0", " A"): -1.0, ("Q0", " B"): -0.5, ("Q0", " C"): -2.0, ("Q0", " D"): -3.0,
    ("Q1", " A"): -0.2, ("Q1", " B"): -0.9, ("Q1", " C"): -0.9, ("Q1", " D"): -4.0,
    ("Q2", " A"): -2.5, ("Q2", " B"): -2.5, ("Q2", " C"): -2.6, ("Q2", " D"): -1.0,
    # Texts: the sums are divided by the choice's characters (acc_norm) or UTF-8 bytes
    # (acc_bytes), the choice without its leading space: "Zürich" is 6 characters, 7 bytes.
    ("Q3", " cat"): -2.0, ("Q3", " elephant"): -4.0,
    ("Q4", " New"): -1.5, ("Q4", " York"): -1.5, ("Q4", " Paris"): -2.9,
    ("Q5", " Zürich"): -2.9, ("Q5", " Bern"): -2.0, ("Q5", " Basel"): -2.2,
}
# fmt: on


def echo_logprob(prefix: str, token: str) -> float:
    marker = next((m for m in ("Q0", "Q1", "Q2", "Q3", "Q4", "Q5") if m in prefix), "")
    return TABLE.get((marker, token), -7.0)


LETTERS = [
    {"id": "r0", "question": "Q0?", "choices": ["w", "x", "y", "z"], "answer_index": 1},
    {"id": "r1", "question": "Q1?", "choices": ["w", "x", "y", "z"], "answer_index": 2},
    {"id": "r2", "question": "Q2?", "choices": ["w", "x", "y", "z"], "answer_index": 3},
]
TEXTS = [
    {"id": "t3", "question": "Q3?", "choices": ["cat", "elephant"], "answer_index": 1},
    {"id": "t4", "question": "Q4?", "choices": ["New York", "Paris"], "answer_index": 0},
    {"id": "t5", "question": "Q5?", "choices": ["Zürich", "Bern", "Basel"], "answer_index": 2},
]


def _model(fake: FakeProvider, **fields: Any) -> dict[str, Any]:
    return {
        "id": "fake",
        "provider": "openai",
        "base_url": fake.base_url,
        "endpoints": ["chat", "completions"],
        "max_concurrency": 2,
        **fields,
    }


async def _run(
    tmp_path: Path,
    fake: FakeProvider,
    records: list[dict[str, Any]],
    continuation: str,
    **model: Any,
) -> tuple[Any, list[Any]]:
    config = make_config(tmp_path, models=[_model(fake, **model)])
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="mc", version="1.0.0", task_type="multiple_choice", records=records
        )
        run = await client.create_run(
            models=["fake"],
            datasets=[("mc", "1.0.0")],
            choice_scoring=ChoiceScoring.LOGLIKELIHOOD,
            dataset_options=[
                DatasetOptions(
                    dataset=DatasetRef("mc", "1.0.0"),
                    choice_continuation=ChoiceContinuation(continuation),
                )
            ],
        )
        await client.wait(run.run_id, timeout_s=60)
        (result,) = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
    return result, sorted(samples, key=lambda s: s.record_id)


async def test_letters_acc_equals_the_hand_computed_argmax(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(), echo_logprob=echo_logprob) as fake:
        result, samples = await _run(tmp_path, fake, LETTERS, "letters")
        calls = [e for e in fake.journal.entries if e.status == 200]
        peak = fake.journal.peak_concurrency("fake")
    # r0: B (-0.5) = gold B; r1: A (-0.2) ≠ gold C; r2: D (-1.0) = gold D.
    assert [s.scores["predicted_index"] for s in samples] == [1.0, 0.0, 3.0]
    assert [s.scores["logprob_B"] for s in samples] == [-0.5, -0.9, -2.5]
    assert result.metrics["acc"] == result.metrics["accuracy"] == pytest.approx(2 / 3)
    assert result.metrics["acc_norm"] == pytest.approx(2 / 3)
    assert {"acc", "acc_norm", "acc_bytes"} <= set(result.intervals)
    # One call per choice, every one counted; never more in flight than the model allows.
    assert len(calls) == 12
    assert result.execution.requests == 12
    assert 1 <= peak <= 2
    assert result.provenance.prompt_format is PromptFormat.PLAIN
    assert samples[0].output.startswith("loglikelihood argmax 'B'")


async def test_texts_acc_norm_divides_by_the_choice_length(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(), echo_logprob=echo_logprob) as fake:
        result, samples = await _run(tmp_path, fake, TEXTS, "texts")
    # t3 (gold elephant): acc cat (-2.0 > -4.0); per char cat -0.667, elephant -0.5.
    # t4 (gold New York = -1.5 - 1.5 = -3.0): acc Paris (-2.9); per char New York -0.375,
    #     Paris -0.58.
    # t5 (gold Basel): acc Bern (-2.0); per char Zürich -0.483, Bern -0.5, Basel -0.44;
    #     per byte Zürich -2.9/7 = -0.414 wins.
    assert [s.scores["predicted_index"] for s in samples] == [0.0, 1.0, 1.0]
    assert [s.scores["predicted_norm_index"] for s in samples] == [1.0, 0.0, 2.0]
    assert [s.scores["logprob_A"] for s in samples] == [-2.0, -3.0, -2.9]
    assert result.metrics["acc"] == 0.0
    assert result.metrics["acc_norm"] == 1.0
    assert result.metrics["acc_bytes"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("continuation", ["letters", "texts"])
async def test_vllm_prompt_logprobs_score_exactly_as_the_echo(
    tmp_path: Path, continuation: str
) -> None:
    """The same records scored from a consistent echo and from prompt_logprobs: the
    same sums and metrics. The second fake's echo is llama-cpp-python's (inconsistent),
    so only prompt_logprobs can score there."""
    records = LETTERS if continuation == "letters" else TEXTS
    for run in ("echo", "prompt"):
        (tmp_path / run).mkdir()
    async with FakeProvider(FakeConfig(), echo_logprob=echo_logprob) as fake:
        echoed, by_echo = await _run(tmp_path / "echo", fake, records, continuation)
    broken_echo = FakeConfig(echo_mode="llama_cpp")
    async with FakeProvider(broken_echo, echo_logprob=echo_logprob) as fake:
        asked, by_prompt = await _run(
            tmp_path / "prompt", fake, records, continuation, loglikelihood_source="prompt_logprobs"
        )
    assert {s.state for s in by_prompt} == {SubtaskState.SUCCEEDED}
    for name in ("acc", "acc_norm", "acc_bytes"):
        assert asked.metrics[name] == echoed.metrics[name], name
    assert [s.scores for s in by_prompt] == [s.scores for s in by_echo]


async def test_llama_cpp_echo_fails_every_sample_naming_the_inconsistency(
    tmp_path: Path,
) -> None:
    config = FakeConfig(echo_mode="llama_cpp")
    async with FakeProvider(config, echo_logprob=echo_logprob) as fake:
        result, samples = await _run(tmp_path, fake, LETTERS, "letters")
        calls = len(fake.journal.entries)
    assert {s.state for s in samples} == {SubtaskState.FAILED_PERMANENT}
    for sample in samples:
        error = sample.last_error
        assert error is not None
        assert error.reason == "PROVIDER_BAD_RESPONSE"
        assert "provider inconsistency (echo_tokens)" in error.message
        assert error.metadata["inconsistency"] == "echo_tokens"
        assert sample.attempts == 1  # permanent: a retry would get the same answer
    assert calls == 3  # the first choice's answer fails its sample: no more calls
    assert "acc" not in result.metrics


async def test_a_model_without_completions_is_refused(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig()) as fake:
        config = make_config(tmp_path, models=[_model(fake, endpoints=["chat"])])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="mc", version="1.0.0", task_type="multiple_choice", records=LETTERS
            )
            with pytest.raises(InvalidArgument) as caught:
                await client.create_run(
                    models=["fake"],
                    datasets=[("mc", "1.0.0")],
                    choice_scoring=ChoiceScoring.LOGLIKELIHOOD,
                )
    assert "needs the completions endpoint" in str(caught.value)
    assert "fake" in str(caught.value)


def _answer_by_endpoint(chat: FakeChatRequest) -> str:
    """Plain prompts (/v1/completions, a "prompt" body) are answered B, chat ones A."""
    return "B" if "prompt" in chat.body else "A"


@pytest.mark.parametrize(
    ("prompt_format", "letter", "scoring"),
    [
        (None, "A", ChoiceScoring.TEXT),
        (PromptFormat.CHAT, "A", ChoiceScoring.TEXT),
        (PromptFormat.PLAIN, "B", ChoiceScoring.TEXT),
        (PromptFormat.PLAIN, "B", ChoiceScoring.LOGPROBS),
    ],
)
async def test_the_prompt_format_picks_the_endpoint_and_is_recorded(
    tmp_path: Path, prompt_format: PromptFormat | None, letter: str, scoring: ChoiceScoring
) -> None:
    async with FakeProvider(FakeConfig(), answer=_answer_by_endpoint) as fake:
        config = make_config(tmp_path, models=[_model(fake)])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="mc", version="1.0.0", task_type="multiple_choice", records=LETTERS
            )
            run = await client.create_run(
                models=["fake"],
                datasets=[("mc", "1.0.0")],
                choice_scoring=scoring,
                prompt_format=prompt_format,
            )
            await client.wait(run.run_id, timeout_s=60)
            (result,) = await client.results(run.run_id)
            samples = [s async for s in client.samples(run.run_id)]
            spec = (await client.get_run(run.run_id)).spec
    assert {s.output for s in samples} == {letter}
    assert {s.scores["predicted_index"] for s in samples} == {ord(letter) - ord("A")}
    assert result.provenance.prompt_format is (prompt_format or PromptFormat.CHAT)
    assert spec.prompt_format is prompt_format
    if scoring is ChoiceScoring.LOGPROBS:  # the legacy logprobs block was read
        assert result.payload is not None
        assert result.payload.logprob_scored == len(LETTERS)  # type: ignore[union-attr]


async def test_every_call_spends_the_models_request_budget(tmp_path: Path) -> None:
    # The fake's quota: 4 requests deep, 4 a second. Were a sample's 4 calls charged as
    # one request, its calls would run ahead of the budget and meet 429s.
    quota = Quota(requests_per_minute=240, burst_s=1.0)
    config = FakeConfig(quotas={"fake": quota})
    async with FakeProvider(config, echo_logprob=echo_logprob) as fake:
        model = _model(fake, requests_per_minute=240, budget_burst_s=1.0)
        server_config = make_config(tmp_path, models=[model])
        records = [{**LETTERS[i % 3], "id": f"r{i}"} for i in range(5)]
        async with running_server(server_config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="mc", version="1.0.0", task_type="multiple_choice", records=records
            )
            run = await client.create_run(
                models=["fake"],
                datasets=[("mc", "1.0.0")],
                choice_scoring=ChoiceScoring.LOGLIKELIHOOD,
            )
            await client.wait(run.run_id, timeout_s=60)
            (result,) = await client.results(run.run_id)
        outcomes = fake.journal.outcomes()
    assert outcomes == {"ok": 20}
    assert result.execution.requests == 20
    assert result.execution.rate_limited == 0


async def test_each_choice_is_asked_once_under_its_own_key(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(), echo_logprob=echo_logprob) as fake:
        await _run(tmp_path, fake, LETTERS, "letters")
        keys = [e.key for e in fake.journal.entries]
        duplicates = fake.journal.duplicates_after_success()
    assert len(keys) == len(set(keys)) == 12
    assert all(key is not None and key.endswith(("#0", "#1", "#2", "#3")) for key in keys)
    assert not duplicates


async def test_a_judge_is_refused_where_nothing_is_generated(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig()) as fake:
        config = make_config(tmp_path, models=[_model(fake)])
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="mc", version="1.0.0", task_type="multiple_choice", records=LETTERS
            )
            with pytest.raises(InvalidArgument) as caught:
                await client.create_run(
                    models=["fake"],
                    datasets=[("mc", "1.0.0")],
                    choice_scoring=ChoiceScoring.LOGLIKELIHOOD,
                    judge=JudgeOptions(model_id="fake"),
                )
    assert "generates no answer for a judge" in str(caught.value)
