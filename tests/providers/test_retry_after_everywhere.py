"""Retry-After is honoured on every retryable status, end to end and in the policy.

The boundaries of the status table and of every ``RetryPolicy`` range are pinned here,
with the documented default policy (3 retries, 5/30/120 s, ±50 %, 600 s cap).
"""

import dataclasses
import random
from pathlib import Path

import pytest

from evald_server.app import DatasetRef, Evald, RetryPolicy, RunSpec
from evald_server.domain import ErrorReason, InvalidArgument, RetryClass, RetryCounts
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider
from evald_server.providers import RetryDecision, RetryKind, classify_status, parse_retry_after
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished


@pytest.mark.anyio
@pytest.mark.parametrize("status", [503, 408, 500])
async def test_a_retry_after_on_a_5xx_or_408_is_waited_for(tmp_path: Path, status: int) -> None:
    script = (Behaviour.error(status, retry_after_s=1.0), Behaviour.ok())
    async with FakeProvider(FakeConfig(sequence=script)) as fake:
        config = make_config(tmp_path, [fake.model_config("m1", max_concurrency=1)])
        policy = RetryPolicy(max_retries=2, backoff_s=(0.05,), jitter=0.0)
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "one", 1)
            spec = RunSpec(
                models=("m1",), datasets=(DatasetRef("one", "1.0.0"),), retry_policy=policy
            )
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id)
        first, second = fake.journal.entries
        assert (first.outcome, second.outcome) == (f"http_{status}", "ok")
        assert first.finished_at is not None
        # The backoff alone would retry after 0.05 s.
        assert second.started_at - first.finished_at >= 1.0


def _rng() -> random.Random:
    return random.Random(4)


@pytest.mark.parametrize("kind", [RetryKind.TRANSIENT, RetryKind.RATE_LIMITED])
def test_the_policy_waits_for_retry_after_of_any_retryable_kind(kind: RetryKind) -> None:
    policy = RetryPolicy(backoff_s=(0.1,), jitter=0.0, retry_after_cap_s=60.0)
    assert policy.delay_s(1, RetryDecision(kind, 3.0), _rng()) == 3.0
    assert policy.delay_s(1, RetryDecision(kind, 600.0), _rng()) == 60.0  # capped
    assert policy.delay_s(1, RetryDecision(kind, 60.0), _rng()) == 60.0  # at the cap
    assert policy.delay_s(1, RetryDecision(kind, 0.01), _rng()) == 0.1  # the backoff is longer
    assert policy.delay_s(1, RetryDecision(kind), _rng()) == 0.1


def test_the_documented_default_policy() -> None:
    policy = RetryPolicy()
    assert policy.max_retries == 3
    assert policy.backoff_s == (5.0, 30.0, 120.0)
    assert policy.jitter == 0.5
    assert policy.retry_after_cap_s == 600.0
    transient = RetryDecision(RetryKind.TRANSIENT)
    counts = [RetryCounts(transient=n) for n in (1, 2, 3, 4)]
    retried = [policy.should_retry(RetryClass.TRANSIENT, c) for c in counts]
    assert retried == [True, True, True, False]
    rng = random.Random(11)
    for attempt, base in ((1, 5.0), (2, 30.0), (3, 120.0), (4, 120.0)):
        delays = [policy.delay_s(attempt, transient, rng) for _ in range(400)]
        assert base * 0.5 <= min(delays) < base * 0.6
        assert base * 1.4 < max(delays) <= base * 1.5


def test_jitter_draws_uniformly_on_both_sides() -> None:
    policy = RetryPolicy(backoff_s=(10.0,), jitter=0.2)
    rng = random.Random(5)
    delays = [policy.delay_s(1, RetryDecision(RetryKind.TRANSIENT), rng) for _ in range(2000)]
    below = sum(d < 10.0 for d in delays)
    assert 900 < below < 1100  # symmetric around the base
    assert min(delays) >= 8.0
    assert max(delays) <= 12.0


def test_delays_are_never_negative_and_zero_backoff_is_zero() -> None:
    policy = RetryPolicy(backoff_s=(0.0,), jitter=1.0)
    assert policy.delay_s(1, RetryDecision(RetryKind.TRANSIENT), _rng()) == 0.0


@pytest.mark.parametrize(
    ("fields", "ok"),
    [
        ({"max_retries": 0}, True),
        ({"max_retries": 100}, True),
        ({"max_retries": -1}, False),
        ({"max_retries": 101}, False),
        ({"backoff_s": ()}, False),
        ({"backoff_s": (0.0,)}, True),
        ({"backoff_s": (86_400.0,)}, True),
        ({"backoff_s": (86_400.5,)}, False),
        ({"backoff_s": (-0.001,)}, False),
        ({"backoff_s": (float("nan"),)}, False),
        ({"backoff_s": (float("inf"),)}, False),
        ({"jitter": 0.0}, True),
        ({"jitter": 1.0}, True),
        ({"jitter": -0.01}, False),
        ({"jitter": 1.01}, False),
        ({"jitter": float("nan")}, False),
        ({"retry_after_cap_s": 0.0}, True),
        ({"retry_after_cap_s": 86_400.0}, True),
        ({"retry_after_cap_s": -1.0}, False),
        ({"retry_after_cap_s": 86_401.0}, False),
        ({"retry_after_cap_s": float("inf")}, False),
    ],
)
def test_policy_ranges_are_inclusive_at_their_bounds(fields: dict[str, object], ok: bool) -> None:
    if ok:
        RetryPolicy(**fields)  # type: ignore[arg-type]
        return
    with pytest.raises(InvalidArgument) as bad:
        RetryPolicy(**fields)  # type: ignore[arg-type]
    assert bad.value.reason is ErrorReason.RUN_SPEC_INVALID
    (violation,) = bad.value.field_violations
    assert violation.field == f"retry_policy.{next(iter(fields))}"


def test_should_retry_at_the_budget_boundary() -> None:
    limited = RetryClass.RATE_LIMITED
    policy = RetryPolicy(max_retries=0)
    assert not policy.should_retry(RetryClass.TRANSIENT, RetryCounts(transient=1))
    assert not policy.should_retry(limited, RetryCounts(rate_limited=1))
    policy = RetryPolicy(max_retries=1)
    assert policy.should_retry(limited, RetryCounts(rate_limited=1))
    assert not policy.should_retry(limited, RetryCounts(rate_limited=2))


def test_a_class_with_its_own_budget_spends_only_that_one() -> None:
    """Classes without a budget of their own share max_retries; one with its own is
    counted against it alone (and does not eat the shared one)."""
    policy = RetryPolicy(max_retries=2, max_rate_limited_retries=10)
    limited, transient, timeout = RetryClass.RATE_LIMITED, RetryClass.TRANSIENT, RetryClass.TIMEOUT
    # Nine 429s and two transient failures: both budgets still hold.
    assert policy.should_retry(limited, RetryCounts(rate_limited=9, transient=2))
    assert policy.should_retry(transient, RetryCounts(rate_limited=9, transient=2))
    assert not policy.should_retry(limited, RetryCounts(rate_limited=11))
    # Timeouts and transient failures share max_retries = 2, together.
    assert not policy.should_retry(timeout, RetryCounts(rate_limited=9, transient=2, timeout=1))
    own = RetryPolicy(max_retries=2, max_timeout_retries=0, max_transient_retries=5)
    assert not own.should_retry(timeout, RetryCounts(timeout=1))
    assert own.should_retry(transient, RetryCounts(transient=5, rate_limited=2))
    assert not own.should_retry(limited, RetryCounts(transient=5, rate_limited=3))
    # Stored in the spec only when set: an older spec's JSON (and its hash) is unchanged.
    assert "max_timeout_retries" not in RetryPolicy(max_retries=2).to_json()
    assert RetryPolicy.from_json(own.to_json()) == own


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (299, ErrorReason.PROVIDER_BAD_RESPONSE, RetryKind.TRANSIENT),
        (300, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (499, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (500, ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT),
        (599, ErrorReason.PROVIDER_HTTP_5XX, RetryKind.TRANSIENT),
        (600, ErrorReason.PROVIDER_BAD_RESPONSE, RetryKind.TRANSIENT),
        (100, ErrorReason.PROVIDER_BAD_RESPONSE, RetryKind.TRANSIENT),
        (407, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (410, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (428, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
        (430, ErrorReason.PROVIDER_REJECTED, RetryKind.PERMANENT),
    ],
)
def test_status_boundaries(status: int, reason: ErrorReason, kind: RetryKind) -> None:
    got, decision = classify_status(status, {"Retry-After": "4"})
    assert (got, decision.kind) == (reason, kind)
    # Retry-After rides on every retryable status, and never on a permanent one.
    expected_after = (
        4.0
        if kind is not RetryKind.PERMANENT and reason is not (ErrorReason.PROVIDER_BAD_RESPONSE)
        else None
    )
    assert decision.retry_after_s == expected_after


@pytest.mark.parametrize("status", [408, 409, 429, 500, 503])
def test_retry_after_ms_rides_on_every_retryable_status(status: int) -> None:
    _, decision = classify_status(status, {"retry-after-ms": "1500"})
    assert decision.retry_after_s == 1.5


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "-250"}, 0.0),
        ({"retry-after-ms": "0"}, 0.0),
        ({"retry-after-ms": "-inf", "Retry-After": "2"}, 2.0),
        ({"Retry-After": "0"}, 0.0),
        ({"Retry-After": "-0.5"}, 0.0),
    ],
)
def test_negative_and_zero_retry_after(headers: dict[str, str], expected: float) -> None:
    assert parse_retry_after(headers, now=0.0) == expected


def test_the_jittered_delay_is_base_times_one_plus_a_uniform_draw() -> None:
    policy = RetryPolicy(backoff_s=(10.0, 40.0), jitter=0.3)
    rng, reference = random.Random(21), random.Random(21)
    for attempt, base in ((1, 10.0), (2, 40.0), (3, 40.0)):
        expected = base * (1.0 + reference.uniform(-0.3, 0.3))
        assert policy.delay_s(attempt, RetryDecision(RetryKind.TRANSIENT), rng) == expected


def test_a_policy_is_a_frozen_value() -> None:
    policy = RetryPolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.max_retries = 5  # type: ignore[misc]
    assert not hasattr(policy, "__dict__")  # slots: no stray attributes either
