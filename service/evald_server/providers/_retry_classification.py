"""Classify a failed model call into an ``ErrorReason`` and a ``RetryDecision``.

Pure functions, no I/O: the provider adapters call them at their boundary, and the
engine only ever sees the resulting ``ProviderFailure``.

=====================================  ===========================  ==============
failure                                reason                       decision
=====================================  ===========================  ==============
HTTP 401, 403                          PROVIDER_AUTH_FAILED         permanent
HTTP 400, 404, 422, other 4xx, 3xx     PROVIDER_REJECTED            permanent
HTTP 429                               PROVIDER_RATE_LIMITED        rate_limited
HTTP 408                               PROVIDER_TIMEOUT             transient
HTTP 409                               PROVIDER_HTTP_5XX            transient
HTTP 5xx                               PROVIDER_HTTP_5XX            transient
client-side timeout                    PROVIDER_TIMEOUT             transient
connect error, reset, early EOF        PROVIDER_CONNECTION_ERROR    transient
unparseable or malformed body          PROVIDER_BAD_RESPONSE        transient
=====================================  ===========================  ==============

A 409 is a conflict the provider resolves by itself (OpenAI returns it for a
concurrent-use lock) and the taxonomy has no closer reason than "server side, retry".
A redirect is never followed (it could carry the API key elsewhere), so it is a
configuration problem: permanent. ``Retry-After`` (delta-seconds or HTTP-date) and
``retry-after-ms`` (preferred: it is more precise) are honoured on every retryable
status, not only 429, up to ``RETRY_AFTER_MAX_S`` (a run's ``retry_after_cap_s`` caps
it further).
"""

import email.utils
import math
import time
from collections.abc import Mapping

from evald_server.domain import ErrorReason
from evald_server.providers._base import ProviderFailure, RetryDecision, RetryKind

# The longest wait a provider may ask for: the most any run's retry_after_cap_s allows.
RETRY_AFTER_MAX_S = 86_400.0

_TRANSIENT = RetryDecision(RetryKind.TRANSIENT)
_PERMANENT = RetryDecision(RetryKind.PERMANENT)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait before retrying, from ``retry-after-ms`` or ``Retry-After``.

    Header names are matched case-insensitively; unparseable, infinite or NaN values
    are ignored (``None``), past dates and negative numbers give ``0.0``, anything
    longer than ``RETRY_AFTER_MAX_S`` gives that. ``now`` is the Unix time an HTTP-date
    is measured from (default: the clock).
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    millis = _parse_number(lowered.get("retry-after-ms"))
    if millis is not None:
        return _bounded(millis / 1000.0)
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    seconds = _parse_number(raw)
    if seconds is None:
        seconds = _parse_http_date(raw, time.time() if now is None else now)
    return None if seconds is None else _bounded(seconds)


def _bounded(seconds: float) -> float:
    return min(max(0.0, seconds), RETRY_AFTER_MAX_S)


def _parse_number(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        value = float(raw.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _parse_http_date(raw: str, now: float) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; an obsolete form may lack the zone
        return None
    return when.timestamp() - now


def classify_status(
    status: int, headers: Mapping[str, str], *, now: float | None = None
) -> tuple[ErrorReason, RetryDecision]:
    """The reason and decision for a non-2xx HTTP status."""
    if status in (401, 403):
        return ErrorReason.PROVIDER_AUTH_FAILED, _PERMANENT
    if status == 429:
        return ErrorReason.PROVIDER_RATE_LIMITED, RetryDecision(
            RetryKind.RATE_LIMITED, parse_retry_after(headers, now=now)
        )
    if status == 408:
        return ErrorReason.PROVIDER_TIMEOUT, _transient_after(headers, now)
    if status == 409 or 500 <= status <= 599:
        return ErrorReason.PROVIDER_HTTP_5XX, _transient_after(headers, now)
    if 300 <= status <= 499:
        return ErrorReason.PROVIDER_REJECTED, _PERMANENT
    # 1xx as a final status or anything outside the HTTP range: the server is confused.
    return ErrorReason.PROVIDER_BAD_RESPONSE, _TRANSIENT


def _transient_after(headers: Mapping[str, str], now: float | None) -> RetryDecision:
    after = parse_retry_after(headers, now=now)
    return _TRANSIENT if after is None else RetryDecision(RetryKind.TRANSIENT, after)


def status_failure(
    status: int,
    headers: Mapping[str, str],
    detail: str,
    *,
    latency_s: float | None = None,
    now: float | None = None,
) -> ProviderFailure:
    """A ``ProviderFailure`` for an HTTP error response; ``detail`` is a short, safe excerpt."""
    reason, decision = classify_status(status, headers, now=now)
    message = f"provider answered HTTP {status}"
    if detail:
        message = f"{message}: {detail}"
    return ProviderFailure(reason, message, decision, http_status=status, latency_s=latency_s)


def timeout_failure(timeout_s: float, *, latency_s: float | None = None) -> ProviderFailure:
    """The call did not finish within the model's ``timeout_s``."""
    return ProviderFailure(
        ErrorReason.PROVIDER_TIMEOUT,
        f"no complete answer within {timeout_s:g} s",
        _TRANSIENT,
        latency_s=latency_s,
    )


def connection_failure(detail: str, *, latency_s: float | None = None) -> ProviderFailure:
    """The connection could not be opened, was reset, or closed before the answer ended."""
    return ProviderFailure(
        ErrorReason.PROVIDER_CONNECTION_ERROR,
        f"connection to the provider failed: {detail}",
        _TRANSIENT,
        latency_s=latency_s,
    )


def bad_response_failure(
    detail: str, *, http_status: int | None = None, latency_s: float | None = None
) -> ProviderFailure:
    """The provider answered, but not with a well-formed chat completion."""
    return ProviderFailure(
        ErrorReason.PROVIDER_BAD_RESPONSE,
        f"malformed provider response: {detail}",
        _TRANSIENT,
        http_status=http_status,
        latency_s=latency_s,
    )


def inconsistent_echo_failure(
    kind: str, detail: str, *, latency_s: float | None = None
) -> ProviderFailure:
    """The completions endpoint answered, but its echoed tokens do not describe the text
    sent (``providers._echo``): permanent, a retry gets the same answer."""
    return ProviderFailure(
        ErrorReason.PROVIDER_BAD_RESPONSE,
        f"provider inconsistency ({kind}): {detail}; the sample is not scored",
        _PERMANENT,
        http_status=200,
        latency_s=latency_s,
        metadata={"inconsistency": kind},
    )
