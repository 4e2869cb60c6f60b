"""The failure → (reason, decision) table and Retry-After parsing: pure functions."""

import email.utils

import pytest

from evald_server.domain import ErrorReason
from evald_server.providers import RetryKind, classify_status, parse_retry_after
from evald_server.providers._retry_classification import (
    RETRY_AFTER_MAX_S,
    bad_response_failure,
    connection_failure,
    status_failure,
    timeout_failure,
)

NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (400, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (401, ErrorReason.PROVIDER_AUTH_FAILED, RetryKind.PERMANENT),
        (403, ErrorReason.PROVIDER_AUTH_FAILED, RetryKind.PERMANENT),
        (404, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (422, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (413, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (307, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (408, ErrorReason.PROVIDER_TIMEOUT, RetryKind.TRANSIENT),
        (409, ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT),
        (429, ErrorReason.PROVIDER_RATE_LIMITED, RetryKind.RATE_LIMITED),
        (500, ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT),
        (502, ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT),
        (503, ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT),
        (504, ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT),
        (599, ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT),
        (199, ErrorReason.PROVIDER_BAD_RESPONSE, RetryKind.TRANSIENT),
    ],
)
def test_status_table(status: int, reason: ErrorReason, kind: RetryKind) -> None:
    got_reason, decision = classify_status(status, {})
    assert (got_reason, decision.kind) == (reason, kind)
    assert decision.retry_after_s is None
    assert decision.retryable is (kind is not RetryKind.PERMANENT)


def test_the_error_table_agrees_on_retryability() -> None:
    for status in (400, 401, 403, 404, 408, 409, 422, 429, 500, 503):
        failure = status_failure(status, {}, "")
        assert failure.error.retryable is failure.decision.retryable, status
        assert failure.error.metadata["httpStatus"] == str(status)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "120"}, 120.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"RETRY-AFTER": " 7 "}, 7.0),
        ({"Retry-After": "-3"}, 0.0),
        ({"retry-after-ms": "250"}, 0.25),
        ({"Retry-After-Ms": "250", "Retry-After": "9"}, 0.25),  # ms is preferred
        ({"retry-after-ms": "nan", "Retry-After": "9"}, 9.0),  # a useless ms falls back
        ({"retry-after-ms": "soon"}, None),
        ({"Retry-After": "inf"}, None),
        ({"Retry-After": "tomorrow"}, None),
        ({"Retry-After": ""}, None),
        ({}, None),
        # No provider holds a call longer than the bound any retry policy allows.
        ({"Retry-After": "1e9"}, 86_400.0),
        ({"Retry-After": "86400"}, 86_400.0),
        ({"Retry-After": "86399.5"}, 86_399.5),
        ({"retry-after-ms": "1e15"}, 86_400.0),
        ({"Retry-After": "1e400"}, None),  # infinite as a float
    ],
)
def test_retry_after_numbers(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_retry_after_http_date() -> None:
    future = email.utils.formatdate(NOW + 30, usegmt=True)
    past = email.utils.formatdate(NOW - 30, usegmt=True)
    assert parse_retry_after({"Retry-After": future}, now=NOW) == pytest.approx(30.0)
    assert parse_retry_after({"Retry-After": past}, now=NOW) == 0.0
    far = email.utils.formatdate(NOW + 10**9, usegmt=True)
    assert parse_retry_after({"Retry-After": far}, now=NOW) == RETRY_AFTER_MAX_S == 86_400.0
    # RFC 9110's example date, measured from a fixed clock.
    assert parse_retry_after(
        {"Retry-After": "Fri, 31 Dec 1999 23:59:59 GMT"}, now=946684799.0 - 12
    ) == pytest.approx(12.0)


def test_rate_limit_carries_retry_after_and_so_do_other_transients() -> None:
    reason, decision = classify_status(429, {"retry-after-ms": "1500"})
    assert reason is ErrorReason.PROVIDER_RATE_LIMITED
    assert decision.kind is RetryKind.RATE_LIMITED
    assert decision.retry_after_s == 1.5
    _, decision = classify_status(503, {"Retry-After": "4"})
    assert (decision.kind, decision.retry_after_s) == (RetryKind.TRANSIENT, 4.0)
    _, decision = classify_status(400, {"Retry-After": "4"})
    assert (decision.kind, decision.retry_after_s) == (RetryKind.PERMANENT, None)


def test_rate_limited_failure_reports_retry_after_in_metadata() -> None:
    failure = status_failure(429, {"Retry-After": "2"}, "slow down", latency_s=0.01)
    assert failure.message == "provider answered HTTP 429: slow down"
    assert failure.error.metadata == {"httpStatus": "429", "retryAfterS": "2"}
    assert failure.latency_s == 0.01


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (timeout_failure(5.0), ErrorReason.PROVIDER_TIMEOUT),
        (connection_failure("reset"), ErrorReason.PROVIDER_CONNECTION_ERROR),
        (bad_response_failure("no choices"), ErrorReason.PROVIDER_BAD_RESPONSE),
    ],
)
def test_non_http_failures_are_transient(failure: object, reason: ErrorReason) -> None:
    from evald_server.providers import ProviderFailure

    assert isinstance(failure, ProviderFailure)
    assert failure.reason is reason
    assert failure.decision.kind is RetryKind.TRANSIENT
    assert failure.error.retryable
