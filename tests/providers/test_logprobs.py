"""Token log-probabilities: asked for only when wanted, read from non-streamed and streamed
answers, and never a reason to fail a call."""

import dataclasses
import json
from typing import Any

import pytest

from evald_server.fake_provider import FakeChatRequest, FakeProvider
from evald_server.providers import build_provider
from evald_server.providers._logprobs import first_token_alternatives
from evald_server.providers._openai_wire import StreamAccumulator, parse_completion, request_body

from .conftest import make_request

pytestmark = pytest.mark.anyio

LETTERS = [(" B", -0.2), ("A", -1.9), ("B", -2.3), ("The", -3.0)]


def test_the_body_asks_for_logprobs_only_when_wanted() -> None:
    plain = json.loads(request_body("m", make_request("k"), stream=False))
    assert "logprobs" not in plain
    assert "top_logprobs" not in plain
    wanted = dataclasses.replace(make_request("k", max_tokens=1), top_logprobs=20)
    body = json.loads(request_body("m", wanted, stream=True))
    assert (body["logprobs"], body["top_logprobs"], body["max_tokens"]) == (True, 20, 1)


def _choice(logprobs: Any) -> dict[str, Any]:
    return {"index": 0, "message": {"role": "assistant", "content": "B"}, "logprobs": logprobs}


def test_the_first_tokens_alternatives_are_read() -> None:
    block = {
        "content": [
            {
                "token": " B",
                "logprob": -0.2,
                "top_logprobs": [{"token": t, "logprob": p} for t, p in LETTERS],
            },
            {"token": ".", "logprob": -0.1, "top_logprobs": [{"token": ".", "logprob": -0.1}]},
        ]
    }
    raw = json.dumps({"choices": [_choice(block)]}).encode()
    assert parse_completion(raw).top_logprobs == tuple(LETTERS)
    # No top list: the token itself.
    only_token = {"content": [{"token": "C", "logprob": -0.5}]}
    assert first_token_alternatives(_choice(only_token)) == ((("C", -0.5),), ())


@pytest.mark.parametrize("block", [None, {}, {"content": None}, {"content": []}])
def test_absent_logprobs_read_as_none_unflagged_and_the_answer_stands(block: Any) -> None:
    raw = json.dumps({"choices": [_choice(block)]}).encode()
    parsed = parse_completion(raw)
    assert parsed.text == "B"
    assert parsed.top_logprobs is None
    assert parsed.flags == ()


@pytest.mark.parametrize(
    "block",
    [
        5,
        {"content": "B"},
        {"content": ["B"]},
        {"content": [{"token": "B", "logprob": "high"}]},
        {"content": [{"token": 3, "logprob": -1.0}]},
        {"content": [{"token": "B", "logprob": True}]},
        # Out of bounds: a log-probability is finite and at most 0.
        {"content": [{"token": "B", "logprob": 0.5}]},
        {
            "content": [
                {
                    "token": "B",
                    "logprob": -0.1,
                    "top_logprobs": [
                        {"token": "B", "logprob": -0.1},
                        {"token": "A", "logprob": 1e308},
                    ],
                }
            ]
        },
    ],
)
def test_invalid_logprobs_read_as_none_flagged_and_the_answer_stands(block: Any) -> None:
    raw = json.dumps({"choices": [_choice(block)]}).encode()
    parsed = parse_completion(raw)
    assert parsed.text == "B"
    assert parsed.top_logprobs is None
    assert parsed.flags == ("logprobs_invalid",)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_logprobs_are_invalid(value: str) -> None:
    entry = '{"token": "B", "logprob": ' + value + "}"
    raw = '{"choices": [{"message": {"content": "B"}, "logprobs": {"content": [' + entry + "]}}]}"
    parsed = parse_completion(raw.encode())
    assert (parsed.top_logprobs, parsed.flags) == (None, ("logprobs_invalid",))


def test_more_alternatives_than_asked_for_keep_the_likeliest_in_order() -> None:
    listed = [{"token": f"t{i}", "logprob": -float(i % 7)} for i in range(30)]
    block = {"content": [{"token": "t0", "logprob": 0.0, "top_logprobs": listed}]}
    parsed = parse_completion(json.dumps({"choices": [_choice(block)]}).encode())
    assert parsed.top_logprobs is not None
    assert len(parsed.top_logprobs) == 20
    kept = [token for token, _ in parsed.top_logprobs]
    assert kept == sorted(kept, key=lambda t: int(t[1:]))  # the provider's order
    assert min(p for _, p in parsed.top_logprobs) >= max(
        float(e["logprob"]) for e in listed if e["token"] not in kept
    )


def test_a_stream_takes_them_from_the_first_chunk_that_has_them() -> None:
    stream = StreamAccumulator()
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "logprobs": None}]}
    first = {
        "choices": [
            {
                "index": 0,
                "delta": {"content": "B"},
                "logprobs": {
                    "content": [
                        {
                            "token": "B",
                            "logprob": -0.3,
                            "top_logprobs": [{"token": "B", "logprob": -0.3}],
                        }
                    ]
                },
            }
        ]
    }
    second = {
        "choices": [
            {
                "index": 0,
                "delta": {"content": "."},
                "logprobs": {"content": [{"token": ".", "logprob": -0.1}]},
                "finish_reason": "length",
            }
        ]
    }
    for chunk in (role, first, second):
        stream.feed(b"data: " + json.dumps(chunk).encode())
    stream.feed(b"data: [DONE]")
    parsed = stream.result()
    assert parsed.text == "B."
    assert parsed.top_logprobs == (("B", -0.3),)


@pytest.mark.parametrize("stream", [False, True])
async def test_through_the_fake_streamed_and_not(stream: bool) -> None:
    def alternatives(chat: FakeChatRequest, text: str) -> list[tuple[str, float]]:
        return LETTERS if "letter" in chat.last_content else []

    async with FakeProvider(answer=lambda chat: "B. yes", alternatives=alternatives) as fake:
        provider = build_provider(fake.model_config("m1", stream=stream))
        try:
            asked = dataclasses.replace(make_request("k1", "a letter?"), top_logprobs=3)
            with_letters = await provider.complete(asked)
            silent = await provider.complete(
                dataclasses.replace(make_request("k2", "no"), top_logprobs=3)
            )
            not_asked = await provider.complete(make_request("k3", "a letter?"))
        finally:
            await provider.aclose()
    assert with_letters.text == "B. yes"
    assert with_letters.top_logprobs == tuple(LETTERS[:3])  # capped at top_logprobs
    assert silent.top_logprobs is None  # a server that sends none
    assert not_asked.top_logprobs is None
