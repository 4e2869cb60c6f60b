"""A provider's rate-limit headers within their bounds: resets capped, limits below a
floor (or far below the declared one) ignored and listed, mangled values ignored, and
the waits they ask for, of requests and of tokens."""

import math

import pytest

from evald_server.config import ModelConfig
from evald_server.providers import parse_duration, parse_rate_limit_headers
from evald_server.providers._rate_limit_headers import (
    DEFAULT_HEADER_BOUNDS,
    DEFAULT_RESET_CAP_S,
    FAR_BELOW,
    REQUESTS_FLOOR,
    TOKENS_FLOOR,
    Adjustment,
    HeaderBounds,
    RateLimitInfo,
)


def _parse(bounds: HeaderBounds = DEFAULT_HEADER_BOUNDS, **headers: str) -> RateLimitInfo:
    info = parse_rate_limit_headers({k.replace("_", "-"): v for k, v in headers.items()}, bounds)
    assert info is not None
    return info


@pytest.mark.parametrize("reset", ["1e9", "99999999h", "1000000m", "86400s", "601"])
def test_a_reset_beyond_the_cap_holds_for_the_cap_and_is_listed(reset: str) -> None:
    info = _parse(x_ratelimit_remaining_requests="0", x_ratelimit_reset_requests=reset)
    assert info.reset_requests_s == DEFAULT_RESET_CAP_S == 600.0
    assert info.requests_wait_s() == 600.0
    assert info.adjusted == (Adjustment("x-ratelimit-reset-requests", reset, "capped at 600 s"),)


def test_the_reset_cap_is_the_models_and_a_reset_at_the_cap_is_kept() -> None:
    bounds = HeaderBounds.of(ModelConfig(id="m", provider="simulated", rate_limit_reset_cap_s=5))
    info = _parse(bounds, x_ratelimit_remaining_tokens="0", x_ratelimit_reset_tokens="1h")
    assert info.reset_tokens_s == 5.0
    assert info.adjusted[0].header == "x-ratelimit-reset-tokens"
    at_cap = _parse(bounds, x_ratelimit_reset_tokens="5s", ratelimit_reset="5")
    assert (at_cap.reset_tokens_s, at_cap.reset_requests_s, at_cap.adjusted) == (5.0, 5.0, ())


@pytest.mark.parametrize(
    ("header", "value", "floor"),
    [
        ("x-ratelimit-limit-requests", "0", REQUESTS_FLOOR),
        ("x-ratelimit-limit-requests", "0.001", REQUESTS_FLOOR),
        ("ratelimit-limit", "0.5", REQUESTS_FLOOR),
        ("x-ratelimit-limit-tokens", "1", TOKENS_FLOOR),
        ("x-ratelimit-limit-tokens", "999.9", TOKENS_FLOOR),
    ],
)
def test_a_limit_below_its_floor_is_ignored_and_named(
    header: str, value: str, floor: float
) -> None:
    info = parse_rate_limit_headers({header: value, "x-ratelimit-remaining-requests": "0"})
    assert info is not None
    assert (info.limit_requests, info.limit_tokens) == (None, None)
    assert info.adjusted == (
        Adjustment(header, value, f"ignored: below the floor of {floor:g} a minute"),
    )


def test_limits_at_their_floors_are_kept() -> None:
    info = _parse(x_ratelimit_limit_requests="1", x_ratelimit_limit_tokens="1000")
    assert (info.limit_requests, info.limit_tokens, info.adjusted) == (1.0, 1000.0, ())


def test_a_limit_far_below_the_declared_one_is_ignored() -> None:
    bounds = HeaderBounds(requests_per_minute=10_000, tokens_per_minute=1_000_000)
    assert FAR_BELOW == 0.01
    far = _parse(bounds, x_ratelimit_limit_requests="99", x_ratelimit_limit_tokens="9999")
    assert (far.limit_requests, far.limit_tokens) == (None, None)
    assert [a.why for a in far.adjusted] == [
        "ignored: under 1% of the declared 10000",
        "ignored: under 1% of the declared 1e+06",
    ]
    near = _parse(bounds, x_ratelimit_limit_requests="100", x_ratelimit_limit_tokens="10000")
    assert (near.limit_requests, near.limit_tokens, near.adjusted) == (100.0, 10000.0, ())


@pytest.mark.parametrize("value", ["-1", "nan", "NaN", "inf", "-inf", "Infinity", "1e400", "x"])
def test_negative_nan_or_infinite_values_are_ignored(value: str) -> None:
    assert (
        parse_rate_limit_headers(
            {
                "x-ratelimit-limit-requests": value,
                "x-ratelimit-remaining-requests": value,
                "x-ratelimit-reset-requests": value,
                "x-ratelimit-limit-tokens": value,
                "x-ratelimit-remaining-tokens": value,
                "x-ratelimit-reset-tokens": value,
            }
        )
        is None
    )


@pytest.mark.parametrize(
    "text", ["", "ms", "1h2", "5x", "1.2.3s", "-5s", "s5", "1 m", "1e3s", "9" * 400 + "h", " "]
)
def test_malformed_durations_are_none(text: str) -> None:
    assert parse_duration(text) is None


def test_well_formed_durations() -> None:
    assert parse_duration(None) is None
    assert parse_duration(" 1m30s ") == 90.0
    assert parse_duration("0") == 0.0
    assert parse_duration("2.5") == 2.5
    assert parse_duration("1h0m0.5s") == 3600.5
    assert parse_duration("250ms") == 0.25


def test_an_empty_header_falls_back_to_the_draft_name() -> None:
    info = _parse(x_ratelimit_limit_requests="", ratelimit_limit="120", ratelimit_remaining="3")
    assert (info.limit_requests, info.remaining_requests) == (120.0, 3.0)


def test_the_requests_wait_is_a_refill_at_the_limit_at_most_the_reset() -> None:
    # 1 left: nothing to hold. 0.5 left (a gateway's average): half a refill.
    assert (
        _parse(x_ratelimit_remaining_requests="1", x_ratelimit_reset_requests="9").requests_wait_s()
        is None
    )
    half = _parse(
        x_ratelimit_limit_requests="60",
        x_ratelimit_remaining_requests="0.5",
        x_ratelimit_reset_requests="9",
    )
    assert half.requests_wait_s() == pytest.approx(0.5)
    short_reset = _parse(
        x_ratelimit_limit_requests="60",
        x_ratelimit_remaining_requests="0",
        x_ratelimit_reset_requests="0.25",
    )
    assert short_reset.requests_wait_s() == 0.25
    at_the_floor = _parse(
        x_ratelimit_limit_requests="1",
        x_ratelimit_remaining_requests="0",
        x_ratelimit_reset_requests="120",
    )
    assert at_the_floor.requests_wait_s() == 60.0  # one a minute: a minute, not the reset
    no_limit = _parse(x_ratelimit_remaining_requests="0", x_ratelimit_reset_requests="3")
    assert no_limit.requests_wait_s() == 3.0
    no_reset = _parse(x_ratelimit_limit_requests="60", x_ratelimit_remaining_requests="0")
    assert no_reset.requests_wait_s() is None


def test_the_tokens_wait_is_for_the_tokens_a_call_needs() -> None:
    info = _parse(
        x_ratelimit_limit_tokens="6000",  # 100 a second
        x_ratelimit_remaining_tokens="100",
        x_ratelimit_reset_tokens="30s",
    )
    assert info.tokens_wait_s(50) is None  # enough left
    assert info.tokens_wait_s(100) is None  # exactly enough
    assert info.tokens_wait_s(500) == pytest.approx(4.0)  # 400 more at 100 a second
    assert info.tokens_wait_s(10_000) == 30.0  # never past the reset
    unstated = _parse(x_ratelimit_remaining_tokens="0", x_ratelimit_reset_tokens="7")
    assert unstated.tokens_wait_s(1) == 7.0
    # The requests' figures say nothing about tokens, and the other way round.
    requests_only = _parse(x_ratelimit_remaining_requests="0", x_ratelimit_reset_requests="7")
    assert requests_only.tokens_wait_s(1) is None
    assert info.requests_wait_s() is None


def test_a_zero_limit_never_divides() -> None:
    # Ignored at the floor; and a RateLimitInfo built with 0 still waits for the reset.
    info = _parse(
        x_ratelimit_limit_requests="0",
        x_ratelimit_remaining_requests="0",
        x_ratelimit_reset_requests="2",
    )
    assert info.limit_requests is None
    assert info.requests_wait_s() == 2.0
    built = RateLimitInfo(limit_tokens=0.0, remaining_tokens=0.0, reset_tokens_s=2.0)
    assert built.tokens_wait_s(10) == 2.0
    assert math.isfinite(built.tokens_wait_s(10) or 0)


def test_only_adjustments_still_report_the_headers() -> None:
    info = parse_rate_limit_headers({"x-ratelimit-limit-requests": "0"})
    assert info is not None  # so that the adapter can name the ignored header
    assert info.limit_requests is None
    assert len(info.adjusted) == 1
