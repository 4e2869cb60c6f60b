"""OpenAIProvider against the fake provider over real loopback HTTP."""

from collections.abc import AsyncIterator

import anyio
import pytest

from evald_server.config import ModelConfig
from evald_server.domain import ErrorReason
from evald_server.fake_provider import Behaviour, FakeChatRequest, FakeProvider
from evald_server.providers import (
    OpenAIProvider,
    ProviderFailure,
    RetryKind,
    build_provider,
)

from .conftest import make_request

pytestmark = pytest.mark.anyio


@pytest.fixture
async def provider(fake: FakeProvider) -> AsyncIterator[OpenAIProvider]:
    model = fake.model_config("m1", model="served-name", timeout_s=5.0)
    built = build_provider(model)
    assert isinstance(built, OpenAIProvider)
    yield built
    await built.aclose()


async def test_success_usage_latency_and_what_is_sent() -> None:
    seen: list[FakeChatRequest] = []

    def answer(request: FakeChatRequest) -> str:
        seen.append(request)
        return "Paris is the answer"

    async with FakeProvider(answer=answer) as server:
        server.configure(latency_ms=20)
        model = server.model_config("m1", model="served-name")
        provider = build_provider(model)
        try:
            request = make_request("sub-1", temperature=0.2, max_tokens=8, seed=3, stop=["\n"])
            completion = await provider.complete(request)
        finally:
            await provider.aclose()
    assert completion.text == "Paris is the answer"
    assert completion.prompt_tokens == 8  # "Answer briefly." + the 6-word question
    assert completion.completion_tokens == 4
    assert completion.latency_s >= 0.02  # the fake slept 20 ms before answering
    assert completion.ttft_s is None
    [sent] = seen
    assert sent.key == "sub-1"
    assert sent.model == "served-name"
    assert sent.body["temperature"] == 0.2
    assert sent.body["max_tokens"] == 8
    assert sent.body["seed"] == 3
    assert sent.body["stop"] == ["\n"]
    assert "top_p" not in sent.body
    assert "stream" not in sent.body
    [entry] = server.journal.entries
    assert (entry.key, entry.model, entry.outcome, entry.status) == (
        "sub-1",
        "served-name",
        "ok",
        200,
    )


async def test_streaming_measures_time_to_first_token(fake: FakeProvider) -> None:
    fake.configure(latency_ms=30, stream_chunk_ms=20, answers={"s-1": "one two three four"})
    provider = build_provider(fake.model_config("m1", stream=True))
    try:
        completion = await provider.complete(make_request("s-1"))
    finally:
        await provider.aclose()
    assert completion.text == "one two three four"
    assert completion.completion_tokens == 4
    assert completion.prompt_tokens == 8
    assert completion.ttft_s is not None
    # The first word comes after the 30 ms latency; three more follow 20 ms apart.
    assert 0.03 <= completion.ttft_s < completion.latency_s
    assert completion.latency_s - completion.ttft_s >= 0.06
    [entry] = fake.journal.entries
    assert entry.stream
    assert entry.outcome == "ok"


FAULTS: list[tuple[Behaviour, ErrorReason, RetryKind, int | None]] = [
    (Behaviour.error(500), ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT, 500),
    (Behaviour.error(502), ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT, 502),
    (Behaviour.error(503), ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT, 503),
    (Behaviour.error(408), ErrorReason.PROVIDER_TIMEOUT, RetryKind.TRANSIENT, 408),
    (Behaviour.error(409), ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT, 409),
    (Behaviour.error(400), ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT, 400),
    (Behaviour.error(404), ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT, 404),
    (Behaviour.error(422), ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT, 422),
    (Behaviour.error(401), ErrorReason.PROVIDER_AUTH_FAILED, RetryKind.PERMANENT, 401),
    (Behaviour.error(403), ErrorReason.PROVIDER_AUTH_FAILED, RetryKind.PERMANENT, 403),
    (Behaviour.rate_limited(), ErrorReason.PROVIDER_RATE_LIMITED, RetryKind.RATE_LIMITED, 429),
    (Behaviour.reset(), ErrorReason.PROVIDER_CONNECTION_ERROR, RetryKind.TRANSIENT, None),
    (Behaviour.malformed(), ErrorReason.PROVIDER_BAD_RESPONSE, RetryKind.TRANSIENT, 200),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("behaviour", "reason", "kind", "status"), FAULTS)
async def test_each_fault_becomes_the_right_failure(
    fake: FakeProvider,
    behaviour: Behaviour,
    reason: ErrorReason,
    kind: RetryKind,
    status: int | None,
    stream: bool,
) -> None:
    fake.script_key("k", behaviour)
    provider = build_provider(fake.model_config("m1", stream=stream))
    try:
        with pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("k"))
        # The scripted fault was the first attempt only: the retry succeeds.
        assert (await provider.complete(make_request("k"))).text
    finally:
        await provider.aclose()
    failure = caught.value
    assert (failure.reason, failure.decision.kind, failure.http_status) == (reason, kind, status)
    assert failure.latency_s is not None
    assert failure.error.reason is reason
    assert [e.outcome for e in fake.journal.entries] == [behaviour.label, "ok"]


@pytest.mark.parametrize(
    ("behaviour", "expected_s"),
    [
        (Behaviour.rate_limited(retry_after_s=3), 3.0),
        (Behaviour.rate_limited(retry_after_ms=1250), 1.25),
        (Behaviour.rate_limited(retry_after_s=40, retry_after_http_date=True), 40.0),
        (Behaviour.error(503, retry_after_s=2), 2.0),
    ],
)
async def test_retry_after_reaches_the_decision(
    fake: FakeProvider, provider: OpenAIProvider, behaviour: Behaviour, expected_s: float
) -> None:
    fake.script_key("k", behaviour)
    with pytest.raises(ProviderFailure) as caught:
        await provider.complete(make_request("k"))
    after = caught.value.decision.retry_after_s
    assert after is not None
    # An HTTP-date has one-second resolution and is measured against the clock.
    assert after == pytest.approx(expected_s, abs=1.01)
    assert caught.value.error.metadata["retryAfterS"] == f"{after:g}"


async def test_hang_times_out_and_the_fake_sees_the_client_leave(fake: FakeProvider) -> None:
    fake.script_key("slow", Behaviour.hang())
    provider = build_provider(fake.model_config("m1", timeout_s=0.3))
    try:
        with pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("slow"))
        await fake.wait_until(lambda j: j.in_flight("m1") == 0, timeout_s=1.0)
    finally:
        await provider.aclose()
    assert caught.value.reason is ErrorReason.PROVIDER_TIMEOUT
    assert caught.value.decision.kind is RetryKind.TRANSIENT
    assert isinstance(caught.value.__cause__, TimeoutError)
    [entry] = fake.journal.disconnects()
    assert (entry.key, entry.outcome) == ("slow", "hang")


async def test_cancelling_the_caller_aborts_the_request_within_a_second(
    fake: FakeProvider, provider: OpenAIProvider
) -> None:
    fake.script_key("doomed", Behaviour.hang())
    finished = False

    async def call() -> None:
        nonlocal finished
        await provider.complete(make_request("doomed"))
        finished = True

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await fake.wait_until(lambda j: j.in_flight("served-name") == 1, timeout_s=5.0)
        tg.cancel_scope.cancel()
    # The fake must notice the closed connection quickly, not when its hang ends.
    await fake.wait_until(lambda j: len(j.disconnects()) == 1, timeout_s=1.0)
    assert not finished
    assert fake.journal.in_flight("served-name") == 0
    [entry] = fake.journal.disconnects()
    assert entry.key == "doomed"
    # The pool is still usable, on a fresh connection.
    assert (await provider.complete(make_request("after"))).text
    assert len(fake.journal.client_ports()) == 2


async def test_cancel_while_streaming_aborts_too(fake: FakeProvider) -> None:
    fake.configure(stream_chunk_ms=5_000, answers={"st": "a b c"})
    provider = build_provider(fake.model_config("m1", stream=True))
    try:
        with anyio.move_on_after(0.2) as scope:
            await provider.complete(make_request("st"))
        assert scope.cancelled_caught
        await fake.wait_until(lambda j: len(j.disconnects()) == 1, timeout_s=1.0)
    finally:
        await provider.aclose()


async def test_connections_are_pooled_and_kept_alive(
    fake: FakeProvider, provider: OpenAIProvider
) -> None:
    fake.script_key("limited", Behaviour.rate_limited(retry_after_s=1))
    for index in range(10):
        await provider.complete(make_request(f"seq-{index}"))
    with pytest.raises(ProviderFailure):
        await provider.complete(make_request("limited"))
    await provider.complete(make_request("seq-after-429"))
    assert len(fake.journal.client_ports()) == 1  # one connection carried all twelve


async def test_pool_size_bounds_concurrent_requests(fake: FakeProvider) -> None:
    fake.configure(latency_ms=50)
    provider = build_provider(fake.model_config("m1", max_concurrency=8), pool_size=2)
    try:
        async with anyio.create_task_group() as tg:
            for index in range(6):
                tg.start_soon(provider.complete, make_request(f"p-{index}"))
    finally:
        await provider.aclose()
    assert fake.journal.peak_concurrency("m1") == 2
    assert fake.journal.requests == 6


async def test_base_url_with_v1_is_not_doubled(fake: FakeProvider) -> None:
    provider = build_provider(fake.model_config("m1", base_url=fake.base_url + "/v1/"))
    try:
        assert isinstance(provider, OpenAIProvider)
        assert provider.url == fake.base_url + "/v1/chat/completions"
        assert (await provider.complete(make_request("v1"))).text
    finally:
        await provider.aclose()


async def test_connection_refused_is_a_transient_connection_error() -> None:
    async with FakeProvider() as gone:
        model = gone.model_config("m1", timeout_s=5.0)
    provider = build_provider(model)  # nothing listens on that port any more
    try:
        with pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("k"))
    finally:
        await provider.aclose()
    assert caught.value.reason is ErrorReason.PROVIDER_CONNECTION_ERROR
    assert caught.value.decision.kind is RetryKind.TRANSIENT
    assert caught.value.__cause__ is not None
    # A closed port is named with its address and the OS's reason, nothing else.
    assert caught.value.message == (
        f"connection to the provider failed: cannot connect to {model.base_url}"
        "/v1/chat/completions (model m1): Connection refused"
    )


async def test_aclose_fails_in_flight_calls_and_refuses_new_ones(fake: FakeProvider) -> None:
    fake.script_key("hung", Behaviour.hang())
    provider = build_provider(fake.model_config("m1"))
    failures: list[ProviderFailure] = []

    async def call() -> None:
        try:
            await provider.complete(make_request("hung"))
        except ProviderFailure as failure:
            failures.append(failure)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await fake.wait_until(lambda j: j.in_flight("m1") == 1, timeout_s=5.0)
        await provider.aclose()
    [failure] = failures
    assert failure.reason is ErrorReason.PROVIDER_CONNECTION_ERROR
    with pytest.raises(RuntimeError, match="closed"):
        await provider.complete(make_request("late"))


async def test_http_error_body_excerpt_is_in_the_message(
    fake: FakeProvider, provider: OpenAIProvider
) -> None:
    fake.script_key("k", Behaviour.error(404, message="The model `x` does not exist"))
    with pytest.raises(ProviderFailure) as caught:
        await provider.complete(make_request("k"))
    assert caught.value.message == "provider answered HTTP 404: The model `x` does not exist"


def test_pool_size_must_be_positive() -> None:
    model = ModelConfig(id="m", provider="openai", base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="pool_size"):
        OpenAIProvider(model, pool_size=0)
