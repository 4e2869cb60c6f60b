"""Rate control's accounting, on a fake clock: token estimates without ``max_tokens``
(the running mean of completions), the usage correction either way, the refund of a
call that never reached the provider, the holds the provider's headers ask for (of
requests and of tokens, with some left), and budgets learned from them."""

import math

import pytest

from evald_server.domain import ErrorReason, EvalError, OutcomeKind
from evald_server.engine import Limiter
from evald_server.engine._rate_control import (
    CHARS_PER_TOKEN,
    HEADROOM,
    ModelRateControl,
    RateSettings,
    TokenEstimate,
)
from evald_server.providers import RateLimitInfo, parse_rate_limit_headers
from evald_server.store import SubtaskOutcome

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _control(clock: Clock, **settings: float) -> ModelRateControl:
    limiter = Limiter(8, {"m": 4})
    return ModelRateControl(
        "m", RateSettings(max_concurrency=4, burst_s=1.0, **settings), limiter.model("m"), clock
    )


def _outcome(kind: OutcomeKind = OutcomeKind.SUCCEEDED, **fields: object) -> SubtaskOutcome:
    return SubtaskOutcome(1, "r", "t", "m", 0, 0, kind, **fields)  # type: ignore[arg-type]


async def test_without_max_tokens_the_completion_is_the_running_mean_of_answers() -> None:
    clock = Clock()
    control = _control(clock)
    assert CHARS_PER_TOKEN == 4
    assert control.estimate(prompt_chars=41, max_tokens=None) == TokenEstimate(11, 256, False)
    assert control.estimate(prompt_chars=40, max_tokens=7) == TokenEstimate(10, 7, True)
    assert TokenEstimate(10, 7, True).total == 17
    for completion in (100, 50, 30):  # a running mean: 100, 75, 60
        ticket = await control.admit()
        control.finished(ticket, _outcome(completion_tokens=completion), None)
    assert control.estimate(prompt_chars=0, max_tokens=None).completion == 60
    # Answers without a count do not move it; failures neither.
    ticket = await control.admit()
    control.finished(ticket, _outcome(), None)
    ticket = await control.admit()
    control.finished(ticket, _outcome(OutcomeKind.FAILED_PERMANENT, completion_tokens=9000), None)
    assert control.estimate(prompt_chars=0, max_tokens=None).completion == 60


async def test_after_fifty_answers_the_mean_moves_a_fiftieth_of_the_way() -> None:
    clock = Clock()
    control = _control(clock)
    for _ in range(50):
        ticket = await control.admit()
        control.finished(ticket, _outcome(completion_tokens=10), None)
    assert control.estimate(prompt_chars=0, max_tokens=None).completion == 10
    ticket = await control.admit()
    control.finished(ticket, _outcome(completion_tokens=510), None)
    assert control.estimate(prompt_chars=0, max_tokens=None).completion == 20  # 10 + 500 / 50


async def test_an_unbounded_call_is_corrected_by_its_whole_usage() -> None:
    clock = Clock()
    control = _control(clock, tokens_per_minute=60_000)  # 950 deep at the headroom
    assert control.tokens is not None
    bucket = control.tokens.bucket
    assert bucket.level == pytest.approx(HEADROOM * 1000)
    estimate = control.estimate(prompt_chars=400, max_tokens=None)  # 100 + 256
    ticket = await control.admit(estimate)
    assert bucket.level == pytest.approx(950 - 356)
    control.finished(ticket, _outcome(prompt_tokens=120, completion_tokens=20), None)
    assert bucket.level == pytest.approx(950 - 140)  # 216 given back
    estimate = control.estimate(prompt_chars=400, max_tokens=None)  # the mean is now 20
    ticket = await control.admit(estimate)
    control.finished(ticket, _outcome(prompt_tokens=100, completion_tokens=300), None)
    assert bucket.level == pytest.approx(950 - 140 - 400)  # 280 more taken


async def test_a_bounded_call_counts_its_max_tokens_in_full() -> None:
    clock = Clock()
    control = _control(clock, tokens_per_minute=60_000)
    assert control.tokens is not None
    bucket = control.tokens.bucket
    ticket = await control.admit(control.estimate(prompt_chars=400, max_tokens=50))
    control.finished(ticket, _outcome(prompt_tokens=90, completion_tokens=3), None)
    assert bucket.level == pytest.approx(950 - 140)  # 90 + 50, whatever was generated
    # Without a prompt count nothing is corrected.
    ticket = await control.admit(control.estimate(prompt_chars=400, max_tokens=50))
    control.finished(ticket, _outcome(completion_tokens=3), None)
    assert bucket.level == pytest.approx(950 - 140 - 150)


@pytest.mark.parametrize("never_sent", [None, _outcome(OutcomeKind.CANCELLED, attempted=False)])
async def test_a_call_that_never_reached_the_provider_is_refunded(
    never_sent: SubtaskOutcome | None,
) -> None:
    clock = Clock()
    control = _control(clock, requests_per_minute=600, tokens_per_minute=60_000)
    assert control.requests is not None
    assert control.tokens is not None
    ticket = await control.admit(control.estimate(prompt_chars=400, max_tokens=50))
    assert control.requests.bucket.level == pytest.approx(9.5 - 1)
    assert control.tokens.bucket.level == pytest.approx(950 - 150)
    control.finished(ticket, never_sent, None)
    assert control.requests.bucket.level == pytest.approx(9.5)
    assert control.tokens.bucket.level == pytest.approx(950)
    control.finished(ticket, never_sent, None)  # settled once
    assert control.requests.bucket.level == pytest.approx(9.5)


async def test_an_attempted_failure_keeps_its_charge() -> None:
    clock = Clock()
    control = _control(clock, requests_per_minute=600)
    assert control.requests is not None
    ticket = await control.admit()
    error = EvalError.of(ErrorReason.PROVIDER_HTTP_5XX, "503")
    control.finished(ticket, _outcome(OutcomeKind.RETRY, error=error), None)
    assert control.requests.bucket.level == pytest.approx(9.5 - 1)


async def test_headers_with_a_request_left_hold_nothing_and_a_fraction_holds_the_rest() -> None:
    clock = Clock()
    control = _control(clock)
    ticket = await control.admit()
    info = parse_rate_limit_headers(
        {
            "x-ratelimit-limit-requests": "60",  # one a second
            "x-ratelimit-remaining-requests": "3",
            "x-ratelimit-reset-requests": "20s",
        }
    )
    control.finished(ticket, _outcome(), info)
    assert control.stats().held_until_s == 0.0
    ticket = await control.admit()
    info = parse_rate_limit_headers(
        {
            "x-ratelimit-limit-requests": "60",
            "x-ratelimit-remaining-requests": "0.25",  # a gateway's share of one
            "x-ratelimit-reset-requests": "20s",
        }
    )
    control.finished(ticket, _outcome(), info)
    assert control.stats().held_until_s == pytest.approx(0.75)
    clock.now += 0.5
    assert control.stats().held_until_s == pytest.approx(0.25)
    clock.now += 1.0
    assert control.stats().held_until_s == 0.0


async def test_headers_short_of_tokens_hold_a_call_for_the_tokens_it_needs() -> None:
    clock = Clock()
    control = _control(clock)
    estimate = control.estimate(prompt_chars=400, max_tokens=100)  # 200 tokens
    ticket = await control.admit(estimate)
    info = parse_rate_limit_headers(
        {
            "x-ratelimit-limit-tokens": "6000",  # 100 a second
            "x-ratelimit-remaining-tokens": "50",
            "x-ratelimit-reset-tokens": "1m",
        }
    )
    assert info is not None
    assert info.tokens_wait_s(200) == pytest.approx(1.5)
    control.finished(ticket, _outcome(), info)
    assert control.stats().held_until_s == pytest.approx(1.5)  # 150 missing at 100 a second


async def test_the_longer_of_the_two_holds_wins_and_a_later_shorter_one_does_not_cut_it() -> None:
    clock = Clock()
    control = _control(clock)
    ticket = await control.admit(TokenEstimate(100, 0, True))
    later = await control.admit()  # admitted before any hold
    both = RateLimitInfo(
        limit_requests=60.0,
        remaining_requests=0.0,
        reset_requests_s=30.0,
        limit_tokens=6000.0,
        remaining_tokens=0.0,
        reset_tokens_s=30.0,
    )
    control.finished(ticket, _outcome(), both)
    assert control.stats().held_until_s == pytest.approx(1.0)  # tokens: 100 at 100 a second
    control.finished(later, _outcome(), RateLimitInfo(remaining_requests=0.0, reset_requests_s=0.1))
    assert control.stats().held_until_s == pytest.approx(1.0)


async def test_a_learned_budget_starts_with_what_the_provider_has_left() -> None:
    clock = Clock()
    control = _control(clock)
    ticket = await control.admit()
    info = parse_rate_limit_headers(
        {
            "x-ratelimit-limit-requests": "600",
            "x-ratelimit-remaining-requests": "4",
            "x-ratelimit-limit-tokens": "60000",
        }
    )
    control.finished(ticket, _outcome(), info)
    assert control.requests is not None
    assert control.tokens is not None
    assert control.requests.bucket.level == pytest.approx(4)
    assert control.tokens.bucket.level == 0.0  # none stated: none assumed
    stats = control.stats()
    assert stats.learned
    assert (stats.requests_per_minute, stats.tokens_per_minute) == (
        pytest.approx(HEADROOM * 600),
        pytest.approx(HEADROOM * 60_000),
    )
    # More than the bucket holds: capped at its depth.
    fresh = _control(Clock())
    ticket = await fresh.admit()
    info = parse_rate_limit_headers(
        {"x-ratelimit-limit-requests": "600", "x-ratelimit-remaining-requests": "599"}
    )
    fresh.finished(ticket, _outcome(), info)
    assert fresh.requests is not None
    assert fresh.requests.bucket.level == pytest.approx(fresh.requests.bucket.capacity)


async def test_a_declared_budget_is_never_replaced_by_a_stated_one() -> None:
    clock = Clock()
    control = _control(clock, requests_per_minute=120)
    ticket = await control.admit()
    info = parse_rate_limit_headers({"x-ratelimit-limit-requests": "6000"})
    control.finished(ticket, _outcome(), info)
    stats = control.stats()
    assert not stats.learned
    assert stats.requests_per_minute == pytest.approx(HEADROOM * 120)


async def test_no_stated_limit_ever_divides_by_zero_or_wedges_a_model() -> None:
    clock = Clock()
    control = _control(clock)
    for limit in ("0", "0.0", "0.001", "-1", "nan", "inf"):
        ticket = await control.admit()
        info = parse_rate_limit_headers(
            {
                "x-ratelimit-limit-requests": limit,
                "x-ratelimit-limit-tokens": limit,
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "2",
            }
        )
        control.finished(ticket, _outcome(), info)
        stats = control.stats()
        assert not stats.learned, limit
        assert math.isfinite(stats.held_until_s)
        assert stats.held_until_s <= 2.0
        clock.now += 5.0
