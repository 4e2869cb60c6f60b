"""The fake provider's rate limits: RPM/TPM quotas with OpenAI's headers, hidden capacity."""

import json

import aiohttp
import anyio
import pytest

from evald_server.fake_provider import FakeConfig, FakeProvider, Quota
from evald_server.fake_provider._quota import duration

pytestmark = pytest.mark.anyio


async def _chat(
    session: aiohttp.ClientSession, fake: FakeProvider, model: str = "m1", **body: object
) -> tuple[int, dict[str, str], bytes]:
    payload = {"model": model, "messages": [{"role": "user", "content": "one two three"}]}
    async with session.post(
        fake.base_url + "/v1/chat/completions", json={**payload, **body}
    ) as response:
        return response.status, dict(response.headers), await response.read()


async def test_requests_quota_answers_429_with_retry_after_and_openai_headers(
    fake: FakeProvider,
) -> None:
    fake.configure(quotas={"m1": Quota(requests_per_minute=3)})
    async with aiohttp.ClientSession() as session:
        answers = [await _chat(session, fake) for _ in range(4)]
        other = await _chat(session, fake, model="m2")  # no quota: never limited
    statuses = [status for status, _, _ in answers]
    assert statuses == [200, 200, 200, 429]
    first = answers[0][1]
    assert first["x-ratelimit-limit-requests"] == "3"
    assert first["x-ratelimit-remaining-requests"] == "2"
    assert first["x-ratelimit-reset-requests"].endswith("s")
    assert answers[2][1]["x-ratelimit-remaining-requests"] == "0"
    limited = answers[3][1]
    assert int(limited["Retry-After"]) >= 19  # a third of a minute refills one request
    assert int(limited["retry-after-ms"]) > 19_000
    assert "rate limit" in json.loads(answers[3][2])["error"]["message"]
    assert other[0] == 200
    assert "x-ratelimit-limit-requests" not in other[1]
    assert fake.journal.outcomes() == {"ok": 4, "quota_requests": 1}


async def test_tokens_quota_counts_prompt_and_max_tokens(fake: FakeProvider) -> None:
    fake.configure(quotas={"*": Quota(tokens_per_minute=100)})
    async with aiohttp.ClientSession() as session:
        first = await _chat(session, fake, max_tokens=60)  # 3 + 60 tokens
        second = await _chat(session, fake, max_tokens=60)  # 63 more do not fit in 37
        small = await _chat(session, fake, max_tokens=10)  # 13 fit
    assert first[0] == 200
    assert first[1]["x-ratelimit-remaining-tokens"] == "37"
    assert second[0] == 429
    assert "Retry-After" in second[1]
    assert small[0] == 200
    assert small[1]["x-ratelimit-remaining-tokens"] == "24"
    assert fake.journal.outcomes()["quota_tokens"] == 1


async def test_quota_refills_with_time(fake: FakeProvider) -> None:
    # 600 a minute, one second's burst: 10 at once, then one every 0.1 s. The quota's
    # clock is the test's, so the burst takes no time however loaded the machine is.
    now = [1000.0]
    fake.quota_clock = lambda: now[0]
    fake.configure(quotas={"m1": Quota(requests_per_minute=600, burst_s=1.0)})
    async with aiohttp.ClientSession() as session:
        burst = [(await _chat(session, fake))[0] for _ in range(11)]
        now[0] += 0.05  # half a request's refill: still refused
        early = (await _chat(session, fake))[0]
        now[0] += 0.2
        later = [(await _chat(session, fake))[0] for _ in range(3)]
    assert burst.count(200) == 10
    assert burst[-1] == 429
    assert early == 429
    assert later == [200, 200, 429]  # 0.25 s refilled two requests and a half


async def test_hidden_capacity_answers_429_above_c_calls_in_flight(fake: FakeProvider) -> None:
    fake.configure(max_concurrent=3, latency_ms=200)
    statuses: list[int] = []

    async def one(session: aiohttp.ClientSession) -> None:
        statuses.append((await _chat(session, fake))[0])

    async with aiohttp.ClientSession() as session, anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(one, session)
    assert sorted(statuses) == [200, 200, 200, 429, 429]
    assert fake.journal.outcomes() == {"ok": 3, "over_capacity": 2}


async def test_journal_keeps_the_usage_of_each_answer(fake: FakeProvider) -> None:
    async with aiohttp.ClientSession() as session:
        await _chat(session, fake)
    entry = fake.journal.entries[0]
    assert (entry.prompt_tokens, entry.completion_tokens) == (3, 3)


def test_quota_config_round_trips_through_json() -> None:
    config = FakeConfig(quotas={"m1": Quota(600, 1000, burst_s=5)}, max_concurrent=4)
    again = FakeConfig().updated(_json(config))
    assert again.quotas == config.quotas
    assert again.max_concurrent == 4
    with pytest.raises(ValueError, match="requests_per_minute"):
        Quota(requests_per_minute=0)


def _json(config: FakeConfig) -> dict[str, object]:
    data = config.to_json()
    return {"quotas": data["quotas"], "max_concurrent": data["max_concurrent"]}


def test_reset_durations_use_openai_format() -> None:
    assert duration(0.02) == "20ms"
    assert duration(1.5) == "1.5s"
    assert duration(360) == "6m0s"
