"""Rate control's pure parts: AIMD episodes, token buckets, moving a limit's capacity,
reading a provider's rate-limit headers."""

import time

import anyio
import pytest

from evald_server.domain import ErrorReason, EvalError, OutcomeKind
from evald_server.engine import Limit, Limiter
from evald_server.engine._rate_control import Aimd, ModelRateControl, RateSettings, TokenBucket
from evald_server.providers import parse_duration, parse_rate_limit_headers
from evald_server.store import SubtaskOutcome

ADAPTIVE = RateSettings(
    adaptive=True,
    min_concurrency=1,
    start_concurrency=2,
    max_concurrency=32,
    decrease_factor=0.7,
    cooldown_s=1.0,
)


def test_slow_start_adds_a_slot_per_success_until_the_first_episode() -> None:
    aimd = Aimd(ADAPTIVE, now=0.0)
    for _ in range(6):
        aimd.on_success(sent_at=0.0, now=0.0)
    assert aimd.capacity == 8
    assert aimd.slow_start


def test_one_decrease_per_episode_not_per_429_of_the_burst() -> None:
    aimd = Aimd(ADAPTIVE, now=0.0)
    for _ in range(18):
        aimd.on_success(sent_at=0.0, now=0.0)
    assert aimd.capacity == 20
    # Five 429s of calls sent before the decrease: one episode, one decrease.
    assert aimd.on_rate_limited(sent_at=1.0, now=2.0)
    for _ in range(4):
        assert not aimd.on_rate_limited(sent_at=1.5, now=2.1)
    assert (aimd.capacity, aimd.episodes, aimd.slow_start) == (14, 1, False)
    # A 429 of a call sent at the new value is a new episode.
    assert aimd.on_rate_limited(sent_at=2.5, now=2.6)
    assert (aimd.capacity, aimd.episodes) == (9, 2)


def test_additive_increase_after_a_window_of_successes() -> None:
    aimd = Aimd(ADAPTIVE, now=0.0)
    aimd.on_success(sent_at=0.0, now=0.0)
    aimd.on_rate_limited(sent_at=0.5, now=1.0)  # 3 -> 2, congestion avoidance
    assert aimd.capacity == 2
    aimd.on_success(sent_at=0.5, now=2.5)  # sent before the decrease: not counted
    aimd.on_success(sent_at=1.5, now=1.6)  # within the one-second cool-down
    aimd.on_success(sent_at=1.5, now=1.7)
    assert aimd.capacity == 2
    aimd.on_success(sent_at=2.1, now=2.2)
    assert aimd.capacity == 2
    aimd.on_success(sent_at=2.1, now=2.2)  # a window is the current value: 2 successes
    assert aimd.capacity == 3
    for _ in range(3):
        aimd.on_success(sent_at=2.15, now=2.3)  # sent at 2, before the increase
    assert aimd.capacity == 3
    for _ in range(3):
        aimd.on_success(sent_at=2.25, now=2.3)  # sent at 3: a window of 3
    assert aimd.capacity == 4


def test_successes_sent_at_a_lower_value_do_not_raise_the_next_one() -> None:
    """Calls sent at v that answer after the increase to v + 1 say nothing about v + 1:
    counting them let the value climb past a capacity it had never tested."""
    aimd = Aimd(ADAPTIVE, now=0.0)
    aimd.on_rate_limited(sent_at=0.0, now=0.0)  # 2 -> 1, congestion avoidance
    aimd.on_success(sent_at=1.5, now=1.6)  # a window of 1: 1 -> 2
    assert aimd.capacity == 2
    for step in range(20):  # a stream of answers of calls sent before that increase
        aimd.on_success(sent_at=1.55, now=1.7 + step / 100)
    assert aimd.capacity == 2


def test_the_decrease_starts_from_the_calls_in_flight_not_a_value_run_ahead() -> None:
    """In slow start the value climbs by one per answer while the calls that test it
    are still out: a 429 of a call sent with 17 in flight decreases from 17, not from
    the 32 the value has reached meanwhile."""
    aimd = Aimd(ADAPTIVE, now=0.0)
    for _ in range(30):
        aimd.on_success(sent_at=0.0, now=0.0)
    assert aimd.capacity == 32
    assert aimd.on_rate_limited(sent_at=0.5, now=0.6, in_flight=17)
    assert aimd.capacity == 11  # floor(17 * 0.7)
    # Without a count (a call that never took a slot) it decreases from the value.
    assert aimd.on_rate_limited(sent_at=0.7, now=0.8)
    assert aimd.capacity == 7


def test_decrease_never_goes_below_min_and_increase_stops_at_max() -> None:
    settings = RateSettings(
        adaptive=True, min_concurrency=3, start_concurrency=3, max_concurrency=5, cooldown_s=0.0
    )
    aimd = Aimd(settings, now=0.0)
    for _ in range(10):
        aimd.on_success(sent_at=0.0, now=0.0)
    assert aimd.capacity == 5
    for step in range(5):
        aimd.on_rate_limited(sent_at=float(step + 1), now=float(step + 1))
    assert aimd.capacity == 3


@pytest.mark.anyio
async def test_lowering_a_limit_hands_on_no_slot_until_below_it() -> None:
    limit = Limit("model.max_concurrency", "m", 3)
    for _ in range(3):
        assert limit.try_acquire()
    waiter_done = anyio.Event()

    async def waiter() -> None:
        await limit.acquire()
        waiter_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        limit.set_capacity(2)
        limit.release()  # 3 -> 2 in use: at capacity, the waiter still waits
        await anyio.wait_all_tasks_blocked()
        assert not waiter_done.is_set()
        assert limit.in_use == 2
        limit.set_capacity(3)  # room again: the waiter gets its slot at once
        await waiter_done.wait()
    assert limit.in_use == 3


def test_token_bucket_refills_and_allows_one_oversized_take() -> None:
    bucket = TokenBucket(per_minute=600, burst_s=1.0, now=0.0)  # 10 deep, 10 a second
    assert bucket.wait_s(10, now=0.0) == 0.0
    bucket.take(10)
    assert bucket.wait_s(1, now=0.0) == pytest.approx(0.1)
    assert bucket.wait_s(1, now=0.1) == pytest.approx(0.0)
    assert bucket.wait_s(50, now=1.0) == 0.0  # bigger than the bucket: a full one will do
    bucket.take(50)
    assert bucket.wait_s(1, now=1.0) == pytest.approx(4.1)


def _outcome(kind: OutcomeKind, **fields: object) -> SubtaskOutcome:
    return SubtaskOutcome(
        row_id=1,
        run_id="r",
        task_id="t",
        model_id="m",
        record_idx=0,
        repeat_index=0,
        kind=kind,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.anyio
async def test_tokens_are_corrected_by_usage_and_kept_for_a_429() -> None:
    now = [0.0]
    limiter = Limiter(8, {"m": 4})
    # 6000 a minute at 95 % headroom: 95 a second, 95 deep.
    settings = RateSettings(max_concurrency=4, tokens_per_minute=6000, burst_s=1.0)
    control = ModelRateControl("m", settings, limiter.model("m"), lambda: now[0])
    assert control.tokens is not None
    unbounded = control.estimate(prompt_chars=40, max_tokens=None)  # 10 + the 256 guess
    assert (unbounded.prompt, unbounded.completion, unbounded.bounded) == (10, 256, False)
    ticket = await control.admit(control.estimate(prompt_chars=40, max_tokens=30))
    assert control.tokens.bucket.level == pytest.approx(95 - 40)
    control.finished(
        ticket, _outcome(OutcomeKind.SUCCEEDED, prompt_tokens=12, completion_tokens=5), None
    )
    # The prompt was 12, not 10; max_tokens bounded the completion: 42 charged in all.
    assert control.tokens.bucket.level == pytest.approx(95 - 42)
    ticket = await control.admit(control.estimate(prompt_chars=40, max_tokens=30))
    error = EvalError.of(ErrorReason.PROVIDER_RATE_LIMITED, "429")
    control.finished(ticket, _outcome(OutcomeKind.RETRY, error=error, rate_limited=True), None)
    # A 429 keeps its charge: the provider's bucket is emptier than ours.
    assert control.tokens.bucket.level == pytest.approx(95 - 42 - 40)
    assert control.rate_limited == 1


@pytest.mark.anyio
async def test_headers_saying_nothing_is_left_hold_new_calls_until_a_refill() -> None:
    limiter = Limiter(8, {"m": 4})
    settings = RateSettings(max_concurrency=4)
    control = ModelRateControl("m", settings, limiter.model("m"), time.monotonic)
    ticket = await control.admit()
    info = parse_rate_limit_headers(
        {
            "x-ratelimit-limit-requests": "600",  # one every 0.1 s
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "6s",
        }
    )
    control.finished(ticket, _outcome(OutcomeKind.SUCCEEDED), info)
    assert 0.05 < control.stats().held_until_s <= 0.1
    started = anyio.current_time()
    with anyio.fail_after(5):
        await control.admit()
    assert anyio.current_time() - started >= 0.05


def test_rate_limit_headers_openai_and_draft_names() -> None:
    info = parse_rate_limit_headers(
        {
            "X-RateLimit-Limit-Tokens": "150000",
            "x-ratelimit-remaining-tokens": "149984",
            "x-ratelimit-reset-tokens": "6m0s",
            "x-ratelimit-remaining-requests": "59",
            "x-ratelimit-reset-requests": "1s",
        }
    )
    assert info is not None
    assert info.limit_tokens == 150000
    assert info.remaining_tokens == 149984
    assert info.reset_tokens_s == 360.0
    assert (info.remaining_requests, info.reset_requests_s) == (59, 1.0)
    assert info.requests_wait_s() is None  # requests left: nothing to hold
    draft = parse_rate_limit_headers(
        {"RateLimit-Limit": "100", "RateLimit-Remaining": "0", "RateLimit-Reset": "30"}
    )
    assert draft is not None
    assert draft.requests_wait_s() == pytest.approx(0.6)  # a refill at 100 a minute
    assert parse_rate_limit_headers({"content-type": "application/json"}) is None
    mangled = parse_rate_limit_headers({"x-ratelimit-remaining-requests": "lots"})
    assert mangled is None


def test_reset_durations() -> None:
    assert parse_duration("20ms") == pytest.approx(0.02)
    assert parse_duration("1m30.5s") == pytest.approx(90.5)
    assert parse_duration("1h2m") == pytest.approx(3720)
    assert parse_duration("7") == 7.0
    assert parse_duration("soon") is None
    assert parse_duration("5s later") is None


@pytest.mark.anyio
async def test_a_limit_the_provider_states_becomes_the_budget() -> None:
    limiter = Limiter(8, {"m": 4})
    control = ModelRateControl("m", RateSettings(max_concurrency=4), limiter.model("m"), _now)
    assert control.requests is None
    ticket = await control.admit()
    info = parse_rate_limit_headers(
        {"x-ratelimit-limit-requests": "1200", "x-ratelimit-remaining-requests": "7"}
    )
    control.finished(ticket, _outcome(OutcomeKind.SUCCEEDED), info)
    stats = control.stats()
    assert stats.learned
    assert stats.requests_per_minute == pytest.approx(0.95 * 1200)  # with the headroom
    assert control.requests is not None
    assert control.requests.bucket.level == pytest.approx(7)  # what the provider has left


def _now() -> float:
    return time.monotonic()


@pytest.mark.anyio
async def test_a_calls_in_flight_count_is_of_calls_sent_before_it() -> None:
    """A burst of waiters admitted at once holds slots before any of them has sent:
    the limit's in-use count says 32 for each, but the 17th to go out was sent with 16
    others in flight, and that is what a 429 of it decreases from."""
    limiter = Limiter(64, {"m": 32})
    control = ModelRateControl("m", RateSettings(max_concurrency=32), limiter.model("m"), _now)
    tickets = [await control.admit() for _ in range(3)]
    for _ in range(3):
        assert limiter.model("m").try_acquire()  # all three hold a slot first
    control.sending(tickets[0])
    control.sending(tickets[1])
    assert [t.in_flight for t in tickets[:2]] == [1, 2]
    control.finished(tickets[0], _outcome(OutcomeKind.SUCCEEDED), None)
    control.finished(tickets[0], _outcome(OutcomeKind.SUCCEEDED), None)  # settled once only
    control.sending(tickets[2])
    assert tickets[2].in_flight == 2


def test_with_n_replicas_the_window_of_successes_is_n_squared_rounds() -> None:
    aimd = Aimd(ADAPTIVE, now=0.0)
    aimd.on_success(sent_at=0.0, now=0.0)
    aimd.on_rate_limited(sent_at=0.5, now=1.0)  # 3 -> 2, congestion avoidance
    for _ in range(2 * 2**2 - 1):  # two replicas: 4 rounds of 2 calls
        aimd.on_success(sent_at=2.1, now=2.2, replicas=2)
    assert aimd.capacity == 2
    aimd.on_success(sent_at=2.1, now=2.2, replicas=2)
    assert aimd.capacity == 3


def test_a_peer_replicas_episodes_decrease_here_once_without_an_episode() -> None:
    limit = Limit("model.max_concurrency", "m", 32)
    now = [0.0]
    control = ModelRateControl("m", ADAPTIVE, limit, lambda: now[0])
    assert control.aimd is not None
    for _ in range(8):
        control.aimd.on_success(sent_at=0.0, now=0.0)
    limit.set_capacity(control.aimd.capacity)
    assert limit.capacity == 10
    now[0] = 5.0
    control.peers_published(replicas=2, concurrency=6, episodes=3)  # the peer's 3 so far
    assert (limit.capacity, control.episodes, control.aimd.slow_start) == (7, 0, False)
    now[0] = 10.0
    control.peers_published(replicas=2, concurrency=6, episodes=3)  # none since
    assert limit.capacity == 7
    stats = control.stats()
    assert (stats.replicas, stats.replicas_concurrency, stats.replicas_episodes) == (2, 13, 3)


@pytest.mark.anyio
async def test_a_quick_429_holds_its_slot_a_mean_answers_time() -> None:
    limit = Limit("model.max_concurrency", "m", 4)
    control = ModelRateControl("m", ADAPTIVE, limit, time.monotonic)
    ok = SubtaskOutcome(1, "r", "t", "m", 0, 0, OutcomeKind.SUCCEEDED, output="x")
    ticket = await control.admit()
    control.sending(ticket)
    await anyio.sleep(0.2)
    control.finished(ticket, ok, None)  # answers take 0.2 s
    limited = await control.admit()
    control.sending(limited)
    started = time.monotonic()
    await control.hold_rate_limited(limited)  # its 429 came back at once
    assert time.monotonic() - started >= 0.15


@pytest.mark.anyio
async def test_a_call_waits_while_its_replica_has_no_share_and_goes_once_given_one() -> None:
    limit = Limit("model.max_concurrency", "m", 4)
    settings = RateSettings(max_concurrency=4, requests_per_minute=600, burst_s=1.0)
    control = ModelRateControl("m", settings, limit, time.monotonic)
    control.set_shares(0.0, None)  # the others hold the whole rate
    admitted = anyio.Event()

    async def call() -> None:
        await control.admit()
        admitted.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.sleep(0.3)
        assert not admitted.is_set(), "no share: nothing fits"
        assert control.requests is not None
        assert control.requests.demand() == 1.0, "it states what waits"
        control.set_shares(300.0, None)  # half of it, from a balancing
        with anyio.fail_after(5):
            await admitted.wait()
    stats = control.stats()
    assert stats.requests_share == 300.0
    assert stats.requests_per_minute == pytest.approx(0.95 * 300.0)
