"""What counts as an answer: interrupted streams, finish_reason, usage, size caps.

Each misbehaviour is one the fake provider reproduces over loopback HTTP, the way a
real server sent it (llama-cpp-python's interrupted streams, a provider sending a
100 MB body or an endless stream of 60 kB deltas).
"""

import anyio
import pytest

from evald_server.domain import ErrorReason
from evald_server.fake_provider import Behaviour, FakeProvider
from evald_server.providers import Completion, ProviderFailure, RetryKind, build_provider

from .conftest import make_request

pytestmark = pytest.mark.anyio


async def test_streams_interrupted_by_the_next_request_fail_instead_of_answering_empty(
    fake: FakeProvider,
) -> None:
    # llama-cpp-python at interrupt_requests = True: a new request ends the stream in
    # progress with a bare [DONE]. Two concurrent streams: the first is cut short.
    fake.configure(interrupt_streams=True, stream_chunk_ms=30, answers={"a": "one two three"})
    provider = build_provider(fake.model_config("m1", stream=True, max_concurrency=2))
    outcomes: dict[str, Completion | ProviderFailure] = {}

    async def call(key: str) -> None:
        try:
            outcomes[key] = await provider.complete(make_request(key))
        except ProviderFailure as failure:
            outcomes[key] = failure

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(call, "a")
            await fake.wait_until(lambda j: len(j.entries) == 1)
            await anyio.sleep(0.05)  # "a" is streaming
            tg.start_soon(call, "b")
    finally:
        await provider.aclose()
    interrupted = outcomes["a"]
    assert isinstance(interrupted, ProviderFailure), interrupted
    assert interrupted.reason is ErrorReason.PROVIDER_BAD_RESPONSE
    assert interrupted.decision.kind is RetryKind.TRANSIENT
    assert "[DONE] but no finish_reason" in interrupted.message
    assert "interrupted" in interrupted.message
    assert isinstance(outcomes["b"], Completion)


@pytest.mark.parametrize(
    ("behaviour", "says"),
    [
        (Behaviour.interrupted(after_chunks=0), r"no chunks \(only \[DONE\]\)"),
        (Behaviour.interrupted(after_chunks=2), r"\[DONE\] but no finish_reason after 2 chunks"),
    ],
)
async def test_scripted_interruptions_are_transient_bad_responses(
    fake: FakeProvider, behaviour: Behaviour, says: str
) -> None:
    fake.script_key("k", behaviour)
    provider = build_provider(fake.model_config("m1", stream=True))
    try:
        with pytest.raises(ProviderFailure, match=says) as caught:
            await provider.complete(make_request("k"))
        assert (await provider.complete(make_request("k"))).finish_reason == "stop"
    finally:
        await provider.aclose()
    assert caught.value.reason is ErrorReason.PROVIDER_BAD_RESPONSE
    assert caught.value.decision.retryable


@pytest.mark.parametrize("stream", [False, True])
async def test_finish_reason_length_when_max_tokens_cuts_the_answer(
    fake: FakeProvider, stream: bool
) -> None:
    fake.configure(answers={"k": "one two three four five"})
    provider = build_provider(fake.model_config("m1", stream=stream))
    try:
        cut = await provider.complete(make_request("k", max_tokens=2))
        whole = await provider.complete(make_request("k", max_tokens=50))
    finally:
        await provider.aclose()
    assert (cut.text, cut.finish_reason) == ("one two", "length")
    assert (whole.text, whole.finish_reason) == ("one two three four five", "stop")


@pytest.mark.parametrize("stream", [False, True])
async def test_no_usage_means_unknown_token_counts_not_zero(
    fake: FakeProvider, stream: bool
) -> None:
    fake.configure(send_usage=False)
    provider = build_provider(fake.model_config("m1", stream=stream))
    try:
        completion = await provider.complete(make_request("k"))
    finally:
        await provider.aclose()
    assert completion.text
    assert (completion.prompt_tokens, completion.completion_tokens) == (None, None)


async def test_a_100_mb_body_stops_at_max_response_bytes(fake: FakeProvider) -> None:
    fake.script_key("big", Behaviour.flood(body_bytes=100 * 1024 * 1024))
    provider = build_provider(fake.model_config("m1", max_response_bytes=1024 * 1024))
    try:
        with anyio.fail_after(10), pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("big"))
        assert (await provider.complete(make_request("big"))).text  # the pool still works
    finally:
        await provider.aclose()
    failure = caught.value
    assert failure.reason is ErrorReason.PROVIDER_BAD_RESPONSE
    assert "max_response_bytes (1048576 bytes)" in failure.message
    assert "model m1" in failure.message


async def test_a_body_under_the_cap_with_an_answer_over_max_answer_bytes_fails(
    fake: FakeProvider,
) -> None:
    fake.script_key("big", Behaviour.flood(body_bytes=300_000))
    provider = build_provider(fake.model_config("m1", max_answer_bytes=200_000))
    try:
        with pytest.raises(ProviderFailure, match=r"max_answer_bytes \(200000 bytes\)"):
            await provider.complete(make_request("big"))
    finally:
        await provider.aclose()


async def test_an_endless_stream_of_60_kb_deltas_stops_at_max_answer_bytes(
    fake: FakeProvider,
) -> None:
    fake.script_key("endless", Behaviour.flood(body_bytes=0, delta_bytes=60_000))
    provider = build_provider(fake.model_config("m1", stream=True, max_answer_bytes=600_000))
    try:
        with anyio.fail_after(10), pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("endless"))
    finally:
        await provider.aclose()
    assert caught.value.reason is ErrorReason.PROVIDER_BAD_RESPONSE
    assert "max_answer_bytes (600000 bytes)" in caught.value.message
    # The client hung up: the fake's endless handler was cancelled, not left writing.
    await fake.wait_until(lambda j: j.entries[0].finished_at is not None, timeout_s=5)
