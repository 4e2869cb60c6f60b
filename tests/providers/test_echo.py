"""The echoed tokens of a completions answer: checked once against named bounds, summed
over the continuation, and refused when they do not describe the text that was sent
(llama-cpp-python 0.3.36's answer, recorded from its server, is refused)."""

import json
import math
from typing import Any

import pytest

from evald_server.fake_provider import EchoMode, hashed_logprob, tokenize
from evald_server.fake_provider._completions import completion_choice
from evald_server.providers._answer_bounds import AnswerBounds
from evald_server.providers._echo import (
    MAX_ECHO_TOKENS,
    EchoInconsistent,
    continuation_score,
    echo_request_fields,
    split_context,
)

BOUNDS = AnswerBounds()

# llama-cpp-python 0.3.36 serving SmolLM2-135M-Instruct (Q4_1), POST /v1/completions with
# {"prompt": "The capital of France is Paris", "max_tokens": 1, "temperature": 0,
#  "logprobs": 1, "echo": true}, recorded 2026-12-02. The generated "." is in the text
# but not among the tokens; the number beside " Paris" (-8.45) is log P(" Paris" | "...
# is Paris"): log P(" Paris" | "... is") is the -0.264 in the entry before it.
LLAMA_CPP_ANSWER: dict[str, Any] = {
    "choices": [
        {
            "text": "The capital of France is Paris.",
            "index": 0,
            "logprobs": {
                "text_offset": [0, 3, 11, 14, 21, 24],
                "token_logprobs": [
                    None,
                    -9.599955558776855,
                    -10.462464332580566,
                    -11.225584030151367,
                    -11.794837951660156,
                    -8.452631950378418,
                ],
                "tokens": ["The", " capital", " of", " France", " is", " Paris"],
                "top_logprobs": [
                    None,
                    {" of": -0.4120810329914093, " capital": -9.599955558776855},
                    {" the": -1.987992525100708, " of": -10.462464332580566},
                    {" is": -0.43200764060020447, " France": -11.225584030151367},
                    {" Paris": -0.264419287443161, " is": -11.794837951660156},
                    {".": -0.3762276768684387, " Paris": -8.452631950378418},
                ],
            },
            "finish_reason": "length",
        }
    ],
    "usage": {"prompt_tokens": 6, "completion_tokens": 1, "total_tokens": 7},
}


def _fake_answer(prompt: str, *, mode: EchoMode = EchoMode.CONSISTENT, max_tokens: int = 1) -> Any:
    choice, used, made = completion_choice(
        0, prompt, echo=True, max_tokens=max_tokens, logprob=hashed_logprob, mode=mode
    )
    return {"choices": [choice], "usage": {"prompt_tokens": used, "completion_tokens": made}}


def test_llama_cpp_python_echo_is_refused_naming_the_missing_token() -> None:
    with pytest.raises(EchoInconsistent) as caught:
        continuation_score(LLAMA_CPP_ANSWER, "The capital of France is", " Paris", BOUNDS)
    assert caught.value.kind == "echo_tokens"
    assert "6 echoed tokens reassemble 30 characters, not the answer's 31" in str(caught.value)


def test_llama_cpp_python_echo_is_refused_by_its_counts_too() -> None:
    # Even with the text cut to the prompt, usage says 6 + 1 tokens where 6 are listed.
    answer = json.loads(json.dumps(LLAMA_CPP_ANSWER))
    answer["choices"][0]["text"] = "The capital of France is Paris"
    with pytest.raises(EchoInconsistent) as caught:
        continuation_score(answer, "The capital of France is", " Paris", BOUNDS)
    assert caught.value.kind == "echo_token_count"


def test_a_consistent_echo_sums_the_continuation_tokens() -> None:
    context, continuation = "Question: where?\nAnswer:", " New York"
    score = continuation_score(_fake_answer(context + continuation), context, continuation, BOUNDS)
    expected = hashed_logprob(context, " New") + hashed_logprob(context + " New", " York")
    assert score.tokens == 2
    assert score.logprob == pytest.approx(expected, abs=0)
    assert (score.prompt_tokens, score.completion_tokens) == (len(tokenize(context)) + 2, 1)


def test_max_tokens_zero_echoes_the_prompt_alone() -> None:
    context, continuation = "Answer:", " B"
    answer = _fake_answer(context + continuation, max_tokens=0)
    score = continuation_score(answer, context, continuation, BOUNDS)
    assert score.logprob == hashed_logprob(context, " B")


def test_the_fakes_llama_mode_reproduces_the_refusal() -> None:
    context, continuation = "Answer:", " B"
    answer = _fake_answer(context + continuation, mode=EchoMode.LLAMA_CPP)
    with pytest.raises(EchoInconsistent, match="reassemble"):
        continuation_score(answer, context, continuation, BOUNDS)


def test_trailing_spaces_of_the_context_move_to_the_continuation() -> None:
    assert split_context("Answer: ", "A") == ("Answer:", " A")
    assert split_context("Answer:", " A") == ("Answer:", " A")


def test_a_boundary_inside_a_token_is_refused() -> None:
    # The fake's tokens are words with their leading spaces: "Answ" + "er:" is one token.
    with pytest.raises(EchoInconsistent) as caught:
        continuation_score(_fake_answer("Answer:"), "Answ", "er:", BOUNDS)
    assert caught.value.kind == "echo_boundary"


def _with(block: dict[str, Any], **changes: Any) -> Any:
    answer = _fake_answer("Answer: B")
    answer["choices"][0]["logprobs"].update(changes)
    answer["choices"][0].update(block)
    return answer


@pytest.mark.parametrize(
    ("changes", "kind", "message"),
    [
        ({"token_logprobs": [None, 0.5, -1.0]}, "echo_bounds", "finite number <= 0"),
        ({"token_logprobs": [None, math.nan, -1.0]}, "echo_bounds", "finite number <= 0"),
        ({"token_logprobs": [None, -math.inf, -1.0]}, "echo_bounds", "finite number <= 0"),
        ({"token_logprobs": [None, "-1", -1.0]}, "echo_bounds", "not a number"),
        ({"token_logprobs": [None, True, -1.0]}, "echo_bounds", "not a number"),
        ({"token_logprobs": [None, None, -1.0]}, "echo_logprobs", "no log-probability"),
        ({"text_offset": [0, 8, 7]}, "echo_offsets", "starts at character 8"),
        ({"text_offset": [0, -1, 9]}, "echo_bounds", "not an offset"),
        ({"text_offset": [0, 7, 99]}, "echo_bounds", "not an offset"),
        ({"text_offset": [0, 7]}, "echo_bounds", "differ in length"),
        ({"tokens": ["Answer:", 5, "."]}, "echo_bounds", "not a string"),
        ({"tokens": None}, "echo_missing", "must be lists"),
    ],
)
def test_numbers_outside_their_bounds_are_refused(
    changes: dict[str, Any], kind: str, message: str
) -> None:
    with pytest.raises(EchoInconsistent, match=message) as caught:
        continuation_score(_with({}, **changes), "Answer:", " B", BOUNDS)
    assert caught.value.kind == kind


def test_more_tokens_than_the_bound_are_refused() -> None:
    prompt = "x" + " x" * 20
    answer = _fake_answer(prompt)
    with pytest.raises(EchoInconsistent, match="over 10"):
        continuation_score(answer, "x" + " x" * 19, " x", AnswerBounds(call_tokens=10))
    assert MAX_ECHO_TOKENS >= 100_000


def test_an_answer_that_ignored_echo_is_refused() -> None:
    answer = _fake_answer("Answer: B")
    del answer["choices"][0]["logprobs"]
    with pytest.raises(EchoInconsistent, match="ignored logprobs/echo"):
        continuation_score(answer, "Answer:", " B", BOUNDS)
    answer = _fake_answer("Answer: B")
    answer["choices"][0]["text"] = "Answer: C."  # not the prompt sent
    with pytest.raises(EchoInconsistent) as caught:
        continuation_score(answer, "Answer:", " B", BOUNDS)
    assert caught.value.kind == "echo_text"


# -- vLLM's prompt_logprobs ------------------------------------------------------------

PROMPT = "Question: 1 + 1?\nAnswer:"


def _prompt_logprobs_answer(
    prompt: str = PROMPT + " B", usage_tokens: int | None = None, **changes: Any
) -> dict[str, Any]:
    """vLLM's answer to ``prompt_logprobs: 0``: null, then each token alone under an id."""
    tokens = tokenize(prompt)
    listed: list[Any] = [None]
    for i in range(1, len(tokens)):
        value = hashed_logprob("".join(tokens[:i]), tokens[i])
        listed.append({str(100 + i): {"logprob": value, "rank": 3, "decoded_token": tokens[i]}})
    for index, entry in changes.items():
        listed[int(index.removeprefix("at"))] = entry
    prompt_tokens = len(tokens) if usage_tokens is None else usage_tokens
    return {
        "choices": [{"index": 0, "text": " 2", "prompt_logprobs": listed}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1},
    }


def _entry(logprob: object = -1.0, token: object = " +", **more: Any) -> dict[str, Any]:
    """Token 2 of the prompt (" +") as vLLM lists it, changed as a test needs."""
    return {"7": {"logprob": logprob, "decoded_token": token}, **more}


def test_prompt_logprobs_sum_the_continuation_as_an_echo_does() -> None:
    score = continuation_score(
        _prompt_logprobs_answer(), PROMPT, " B", BOUNDS, source="prompt_logprobs"
    )
    assert score.logprob == hashed_logprob(PROMPT, " B")
    assert score.tokens == 1
    fields = echo_request_fields(PROMPT + " B", 1, None, source="prompt_logprobs")
    assert fields == {
        "prompt": PROMPT + " B",
        "max_tokens": 1,
        "temperature": 0,
        "prompt_logprobs": 0,
    }


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        ({"choices": [{"text": "x"}]}, "echo_missing"),
        (_prompt_logprobs_answer(at0=_entry()), "echo_bounds"),
        (_prompt_logprobs_answer(at2=_entry(**{"8": {"logprob": -2.0}})), "echo_bounds"),
        (_prompt_logprobs_answer(at2=_entry(0.5)), "echo_bounds"),
        (_prompt_logprobs_answer(at2=_entry(math.nan)), "echo_bounds"),
        (_prompt_logprobs_answer(at2=_entry(token=None)), "echo_bounds"),
        (_prompt_logprobs_answer(at2=_entry(token=" -")), "echo_tokens"),
        (_prompt_logprobs_answer(usage_tokens=3), "echo_token_count"),
        (_prompt_logprobs_answer(prompt=PROMPT + " C"), "echo_tokens"),
    ],
)
def test_prompt_logprobs_that_do_not_describe_the_prompt_are_refused(
    answer: dict[str, Any], kind: str
) -> None:
    with pytest.raises(EchoInconsistent) as caught:
        continuation_score(answer, PROMPT, " B", BOUNDS, source="prompt_logprobs")
    assert caught.value.kind == kind
