"""The fake provider itself: scripting, fault mix, journal accounting, control API."""

import json
from collections import Counter
from typing import Any

import aiohttp
import anyio
import pytest

from evald_server.fake_provider import (
    Behaviour,
    FakeConfig,
    FakeControl,
    FakeProvider,
    FaultRate,
    Kind,
)

pytestmark = pytest.mark.anyio


async def _post(
    session: aiohttp.ClientSession,
    base_url: str,
    key: str | None,
    model: str = "m1",
    *,
    body: Any = None,
) -> tuple[int, bytes]:
    headers = {"X-Evald-Subtask": key} if key is not None else {}
    message = {"role": "user", "content": "hi there"}
    payload = body if body is not None else {"model": model, "messages": [message]}
    async with session.post(
        base_url + "/v1/chat/completions", json=payload, headers=headers
    ) as response:
        return response.status, await response.read()


async def test_peak_concurrency_and_in_flight_are_counted_per_model(fake: FakeProvider) -> None:
    fake.configure(latency_ms=100)
    in_flight_seen: list[int] = []
    async with aiohttp.ClientSession() as session, anyio.create_task_group() as tg:
        for index in range(10):
            tg.start_soon(_post, session, fake.base_url, f"k{index}", "m1" if index < 6 else "m2")
        await fake.wait_until(lambda j: j.in_flight() == 10, timeout_s=5.0)
        in_flight_seen += [fake.journal.in_flight("m1"), fake.journal.in_flight("m2")]
    assert in_flight_seen == [6, 4]
    assert fake.journal.peak_concurrency("m1") == 6
    assert fake.journal.peak_concurrency("m2") == 4
    assert fake.journal.peak_concurrency() == 10
    assert fake.journal.in_flight() == 0
    assert fake.journal.peak_concurrency("never-seen") == 0


async def test_sequential_requests_never_overlap(fake: FakeProvider) -> None:
    async with aiohttp.ClientSession() as session:
        for index in range(5):
            await _post(session, fake.base_url, f"k{index}")
    assert fake.journal.peak_concurrency("m1") == 1


async def test_per_key_script_then_success_and_duplicates_after_success(
    fake: FakeProvider,
) -> None:
    fake.script_key("K", Behaviour.error(503), Behaviour.error(503))
    async with aiohttp.ClientSession() as session:
        statuses = [(await _post(session, fake.base_url, "K"))[0] for _ in range(4)]
        await _post(session, fake.base_url, "other")
    assert statuses == [503, 503, 200, 200]
    journal = fake.journal
    assert journal.count("K") == 4
    assert journal.count("other") == 1
    assert [e.attempt for e in journal.entries if e.key == "K"] == [0, 1, 2, 3]
    assert journal.duplicates_after_success() == {"K": 1}  # the 4th came after the 3rd's success
    assert journal.succeeded_keys() == {"K", "other"}
    assert journal.outcomes() == {"http_503": 2, "ok": 3}


async def test_sequence_script_applies_to_the_nth_request(fake: FakeProvider) -> None:
    fake.configure(sequence=(Behaviour.ok(), Behaviour.error(502), Behaviour.malformed()))
    async with aiohttp.ClientSession() as session:
        results = [await _post(session, fake.base_url, f"k{i}") for i in range(4)]
    assert [status for status, _ in results] == [200, 502, 200, 200]
    with pytest.raises(json.JSONDecodeError):
        json.loads(results[2][1])
    assert [e.outcome for e in fake.journal.entries] == ["ok", "http_502", "malformed", "ok"]


async def test_rate_limit_headers(fake: FakeProvider) -> None:
    fake.configure(
        sequence=(
            Behaviour.rate_limited(retry_after_s=2),
            Behaviour.rate_limited(retry_after_ms=250),
            Behaviour.rate_limited(retry_after_s=60, retry_after_http_date=True),
        )
    )
    async with aiohttp.ClientSession() as session:
        headers = []
        for index in range(3):
            async with session.post(
                fake.base_url + "/v1/chat/completions",
                json={"model": "m", "messages": []},
                headers={"X-Evald-Subtask": f"k{index}"},
            ) as response:
                assert response.status == 429
                headers.append(response.headers)
    assert headers[0]["Retry-After"] == "2"
    assert headers[1]["retry-after-ms"] == "250"
    assert headers[2]["Retry-After"].endswith(" GMT")


async def test_answers_by_key_callable_and_echo() -> None:
    async with (
        FakeProvider(
            FakeConfig(answers={"mapped": "from the mapping"}),
            answer=lambda request: request.last_content.upper(),
        ) as fake,
        aiohttp.ClientSession() as session,
    ):
        mapped = json.loads((await _post(session, fake.base_url, "mapped"))[1])
        called = json.loads((await _post(session, fake.base_url, "other"))[1])
    assert mapped["choices"][0]["message"]["content"] == "from the mapping"
    assert called["choices"][0]["message"]["content"] == "HI THERE"
    assert called["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    async with FakeProvider() as echo, aiohttp.ClientSession() as session:
        echoed = json.loads((await _post(session, echo.base_url, None))[1])
    assert echoed["choices"][0]["message"]["content"] == "hi there"


@pytest.mark.parametrize(
    "body", [[1], {"model": "m"}, {"messages": []}, {"model": "m", "messages": [1]}]
)
async def test_bad_requests_get_400_and_are_journaled(fake: FakeProvider, body: Any) -> None:
    async with aiohttp.ClientSession() as session:
        status, raw = await _post(session, fake.base_url, "bad", body=body)
    assert status == 400
    assert "invalid request" in json.loads(raw)["error"]["message"]
    assert fake.journal.outcomes() == {"bad_request": 1}


async def test_api_key_is_enforced_when_configured(fake: FakeProvider) -> None:
    fake.configure(api_key="sk-fake")
    async with aiohttp.ClientSession() as session:
        assert (await _post(session, fake.base_url, "a"))[0] == 401
        session.headers["Authorization"] = "Bearer sk-fake"
        assert (await _post(session, fake.base_url, "b"))[0] == 200


def test_fault_mix_follows_the_rates() -> None:
    config = FakeConfig(
        faults=(
            FaultRate(Behaviour.rate_limited(retry_after_s=1), 0.10),
            FaultRate(Behaviour.error(500), 0.05),
            FaultRate(Behaviour.reset(), 0.05),
        ),
        seed=3,
    )
    n = 20_000
    counts = Counter(config.choose(i, f"key-{i}", 0).label for i in range(n))
    for label, rate in [("http_429", 0.10), ("http_500", 0.05), ("reset", 0.05), ("ok", 0.80)]:
        assert abs(counts[label] / n - rate) <= 5 * (rate * (1 - rate) / n) ** 0.5, label
    # A key's k-th attempt meets the same fate whatever order requests arrive in.
    assert config.choose(0, "key-77", 2) == config.choose(999, "key-77", 2)


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="more than 1"):
        FakeConfig(faults=(FaultRate(Behaviour.hang(), 0.6), FaultRate(Behaviour.reset(), 0.6)))
    with pytest.raises(ValueError, match="rate"):
        FaultRate(Behaviour.hang(), 1.5)
    with pytest.raises(ValueError, match="4xx or 5xx"):
        Behaviour.error(200)
    with pytest.raises(ValueError, match="unknown fields"):
        FakeConfig().updated({"latency": 3})
    with pytest.raises(ValueError, match=">= 0"):
        FakeConfig(latency_ms=-1)


def test_config_json_round_trip() -> None:
    config = FakeConfig().updated(
        {
            "latency_ms": 5,
            "faults": [{"rate": 0.1, "behaviour": {"kind": "status", "status": 503}}],
            "sequence": [{"kind": "hang"}],
            "per_key": {"K": [{"kind": "status", "status": 429, "retry_after_ms": 100}]},
            "answers": {"K": "yes"},
        }
    )
    assert config.faults == (FaultRate(Behaviour.error(503), 0.1),)
    assert config.sequence == (Behaviour(Kind.HANG),)
    assert config.per_key["K"] == (Behaviour.rate_limited(retry_after_ms=100),)
    again = FakeConfig().updated({k: v for k, v in config.to_json().items() if k != "api_key_set"})
    assert again == config


async def test_control_api(fake: FakeProvider) -> None:
    control = FakeControl(fake.base_url)
    changed = await control.configure(
        per_key={"K": [{"kind": "status", "status": 503}]}, latency_ms=1
    )
    assert changed["latency_ms"] == 1
    assert fake.config.per_key["K"] == (Behaviour.error(503),)
    async with aiohttp.ClientSession() as session:
        for _ in range(3):
            await _post(session, fake.base_url, "K")
    entries = await control.journal()
    assert [(e.key, e.outcome, e.attempt) for e in entries] == [
        ("K", "http_503", 0),
        ("K", "ok", 1),
        ("K", "ok", 2),
    ]
    assert [e.seq for e in await control.journal(since=2)] == [3]
    assert await control.duplicates_after_success() == {"K": 1}
    stats = await control.stats()
    assert stats["requests"] == 3
    assert stats["peak_concurrency"] == {"m1": 1}
    assert stats["cpu_per_request_us"] > 0
    with pytest.raises(RuntimeError, match="HTTP 400"):
        await control.configure(bogus=1)
    await control.reset()
    assert (await control.stats())["requests"] == 0
    assert fake.journal.entries == []


async def test_journal_keeps_counting_past_its_entry_limit() -> None:
    async with FakeProvider(max_journal_entries=2) as fake, aiohttp.ClientSession() as session:
        for index in range(4):
            await _post(session, fake.base_url, f"k{index}")
    assert len(fake.journal.entries) == 2
    assert fake.journal.truncated
    assert fake.journal.requests == 4
    assert fake.journal.outcomes() == {"ok": 4}


async def test_reset_behaviour_sends_no_response(fake: FakeProvider) -> None:
    fake.script_key("r", Behaviour.reset())
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            await _post(session, fake.base_url, "r")
    [entry] = fake.journal.entries
    assert (entry.outcome, entry.status, entry.disconnected) == ("reset", None, False)
    assert fake.journal.in_flight() == 0


async def test_wait_until_times_out(fake: FakeProvider) -> None:
    with pytest.raises(TimeoutError):
        await fake.wait_until(lambda j: j.requests > 0, timeout_s=0.05)


def test_base_url_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = FakeProvider().base_url


def test_latency_fixed_log_normal_and_overridden() -> None:
    ok = Behaviour.ok()
    assert FakeConfig().latency_s(ok, 0, "k", 0) == 0.0
    assert FakeConfig(latency_ms=50).latency_s(ok, 0, "k", 0) == 0.05
    config = FakeConfig(latency_ms=50, latency_sigma=0.5, seed=1)
    draws = sorted(config.latency_s(ok, i, f"k{i}", 0) for i in range(2_001))
    # The sample median of 2,001 draws has a standard error of ~1.4 %: 10 % is 7 of them.
    assert draws[1_000] == pytest.approx(0.05, rel=0.1)
    assert draws[0] < 0.03 < 0.08 < draws[-1]
    assert config.latency_s(Behaviour.ok(latency_ms=5), 0, "k", 0) == 0.005


async def test_latency_delays_the_answer(fake: FakeProvider) -> None:
    fake.configure(latency_ms=30)
    async with aiohttp.ClientSession() as session:
        await _post(session, fake.base_url, "slow")
    [entry] = fake.journal.entries
    assert entry.finished_at is not None
    assert entry.finished_at - entry.started_at >= 0.029


async def test_a_scripted_answer_sends_its_fields_and_headers_verbatim(fake: FakeProvider) -> None:
    usage = {"prompt_tokens": 10**30, "completion_tokens": -1}
    fake.configure(
        sequence=(
            Behaviour.scripted(
                content="x\ud800",
                finish_reason=7,
                usage=usage,
                logprobs={"content": [{"token": "x", "logprob": float("nan")}]},
                headers={"x-ratelimit-reset-requests": "99999999h"},
            ),
            Behaviour.scripted(usage=None),
            Behaviour.error(429, headers={"Retry-After": "1e9"}),
        )
    )
    async with aiohttp.ClientSession() as session:
        async with session.post(
            fake.base_url + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        ) as response:
            assert response.headers["x-ratelimit-reset-requests"] == "99999999h"
            raw = await response.read()
        assert b'"x\\ud800"' in raw  # escaped as a provider would send it
        body = json.loads(raw)
        choice = body["choices"][0]
        assert (choice["finish_reason"], body["usage"]) == (7, usage)
        assert (
            choice["logprobs"]["content"][0]["logprob"]
            != choice["logprobs"]["content"][0]["logprob"]
        )  # NaN
        async with session.post(
            fake.base_url + "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True},
        ) as response:
            events = [line async for line in response.content if line.startswith(b"data:")]
        async with session.post(
            fake.base_url + "/v1/chat/completions", json={"model": "m", "messages": []}
        ) as response:
            assert (response.status, response.headers["Retry-After"]) == (429, "1e9")
    chunks = [json.loads(e[5:]) for e in events[:-1]]
    assert events[-1].strip() == b"data: [DONE]"
    assert chunks[1]["choices"][0]["delta"]["content"] == "hi"  # content not scripted: the echo
    assert chunks[2]["choices"][0]["finish_reason"] == "stop"
    assert "usage" not in chunks[-1] or chunks[-1]["usage"] is None
    assert [e.outcome for e in fake.journal.entries] == ["scripted", "scripted", "http_429"]


def test_scripted_behaviours_round_trip_and_refuse_unknown_fields() -> None:
    scripted = Behaviour.scripted(usage={"prompt_tokens": 1}, headers={"a": "b"}, content=None)
    assert Behaviour.from_json(json.loads(json.dumps(scripted.to_json()))) == scripted
    with pytest.raises(ValueError, match="unknown answer fields"):
        Behaviour.scripted(text="x")
    with pytest.raises(ValueError, match="unknown answer fields"):
        Behaviour.from_json({"kind": "scripted", "fields": {"choices": []}})
