"""Pure logic: retry policy, limits, percentiles, result round trips, task outcomes."""

import random

import anyio
import pytest

from evald_server.config import GenerationParams
from evald_server.domain import (
    ErrorReason,
    EvalError,
    InvalidArgument,
    ResultStatus,
    RetryClass,
    RetryCounts,
    TaskType,
)
from evald_server.engine import (
    BenchmarkRef,
    ExecutionProfile,
    Limit,
    Limiter,
    ModelIdentity,
    Provenance,
    RetryPolicy,
    RunSpec,
    TaskEvaluation,
    check_limit,
    percentile,
)
from evald_server.engine import DatasetRef as Ref
from evald_server.providers import RetryDecision, RetryKind
from evald_server.scoring import ScoringSample, score_task

TRANSIENT = RetryDecision(RetryKind.TRANSIENT)


def test_backoff_follows_the_schedule_and_repeats_its_last_step() -> None:
    policy = RetryPolicy(backoff_s=(5, 30, 120), jitter=0.0)
    rng = random.Random(1)
    assert [policy.delay_s(n, TRANSIENT, rng) for n in (1, 2, 3, 4)] == [5, 30, 120, 120]


def test_jitter_stays_within_its_fraction() -> None:
    policy = RetryPolicy(backoff_s=(10.0,), jitter=0.5)
    rng = random.Random(7)
    delays = [policy.delay_s(1, TRANSIENT, rng) for _ in range(500)]
    assert min(delays) >= 5.0
    assert max(delays) <= 15.0
    assert max(delays) - min(delays) > 5.0  # it does vary


def test_rate_limits_wait_for_retry_after_up_to_the_cap() -> None:
    policy = RetryPolicy(backoff_s=(1.0,), jitter=0.0, retry_after_cap_s=60.0)
    rng = random.Random(0)
    limited = RetryDecision(RetryKind.RATE_LIMITED, retry_after_s=20.0)
    assert policy.delay_s(1, limited, rng) == 20.0
    assert policy.delay_s(1, RetryDecision(RetryKind.RATE_LIMITED, 3600.0), rng) == 60.0
    assert policy.delay_s(1, RetryDecision(RetryKind.RATE_LIMITED, 0.1), rng) == 1.0
    assert policy.delay_s(1, RetryDecision(RetryKind.RATE_LIMITED), rng) == 1.0


def test_permanent_decisions_and_exhausted_budgets_stop_retrying() -> None:
    policy = RetryPolicy(max_retries=2)
    transient = RetryClass.TRANSIENT
    assert policy.should_retry(transient, RetryCounts(transient=1))
    assert policy.should_retry(transient, RetryCounts(transient=2))
    assert not policy.should_retry(transient, RetryCounts(transient=3))
    assert not policy.should_retry(None, RetryCounts())  # a permanent failure


def test_bad_policies_name_their_field() -> None:
    with pytest.raises(InvalidArgument) as bad:
        RetryPolicy(max_retries=-1, jitter=2.0)
    assert [v.field for v in bad.value.field_violations] == [
        "retry_policy.max_retries",
        "retry_policy.jitter",
    ]
    assert RetryPolicy.from_json(RetryPolicy(backoff_s=(0.1,)).to_json()) == RetryPolicy(
        backoff_s=(0.1,)
    )


def test_run_specs_round_trip_and_hash_their_body() -> None:
    spec = RunSpec(
        models=("a", "b"),
        datasets=(Ref("d", "1.0.0"),),
        repeat=2,
        params=GenerationParams(temperature=0.0),
        labels={"team": "x"},
    )
    again = RunSpec.from_json(spec.to_json())
    assert again == spec
    assert again.body_hash() == spec.body_hash()
    assert RunSpec(models=("a", "b"), datasets=(Ref("d", "1.0.0"),)).body_hash() != spec.body_hash()


def test_limits_below_one_are_rejected_with_their_name() -> None:
    with pytest.raises(InvalidArgument) as bad:
        check_limit("model.max_concurrency", 0)
    assert bad.value.metadata == {"limit": "model.max_concurrency"}
    with pytest.raises(InvalidArgument):
        Limiter(0, {})
    with pytest.raises(InvalidArgument):
        Limiter(4, {"m": 0})


@pytest.mark.anyio
async def test_limit_statistics_show_use_and_waiters() -> None:
    limit = Limit("max_inflight", "server", 2)
    await limit.acquire()
    assert limit.try_acquire()
    assert not limit.try_acquire()
    async with anyio.create_task_group() as tg:
        tg.start_soon(limit.acquire)
        await anyio.wait_all_tasks_blocked()
        stats = limit.stats()
        assert (stats.capacity, stats.in_use, stats.waiting) == (2, 2, 1)
        limit.release()  # hands the slot to the waiter
    assert (limit.stats().in_use, limit.stats().waiting) == (2, 0)


def test_percentiles_interpolate_like_numpy() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile([7.0], 99) == 7.0


@pytest.mark.parametrize(
    ("task_type", "record", "output"),
    [
        (TaskType.CLASSIFICATION, {"input": "x", "label": "a", "choices": ["a", "b"]}, "a"),
        (TaskType.QA, {"question": "q", "answers": ["Paris"]}, "Paris"),
        (TaskType.GENERATION, {"input": "2+2", "reference": "4", "match": "numeric"}, "4"),
    ],
)
def test_a_task_evaluation_survives_its_json_round_trip(
    task_type: TaskType, record: dict[str, object], output: str
) -> None:
    samples = [ScoringSample(f"s{i}", f"r{i}", 0, record, output) for i in range(4)]
    report = score_task(task_type, samples, seed=3, resamples=20)
    evaluation = TaskEvaluation(
        task_id="t",
        run_id="r",
        task_type=task_type,
        model=ModelIdentity("m", "simulated", "m", GenerationParams(seed=1)),
        benchmark=BenchmarkRef("d", "1.0.0", "0" * 64, 4),
        status=ResultStatus.SUCCESS,
        report=report,
        profile=ExecutionProfile(
            4, 4, 0, 0, 1.0, 1.0, 1.0, 1.0, 1.0, None, None, 4, 4, 4.0, 4, 0, 0, 1.0, 0.1
        ),
        errors=(EvalError.of(ErrorReason.PROVIDER_TIMEOUT, "slow", samples=1),),
        provenance=Provenance(
            "1.0.0", "0.1.0", report.scorer, "a" * 64, "0" * 64, "3.11", "linux", 3
        ),
        created_at=1.0,
    )
    again = TaskEvaluation.from_json(evaluation.to_json())
    assert again.report is not None
    assert again.report.sample_scores == []  # per-sample scores live beside each subtask
    assert again.report.metrics == report.metrics
    assert again.report.payload == report.payload
    assert again.report.uncertainty == report.uncertainty
    assert (again.model, again.profile, again.errors, again.provenance) == (
        evaluation.model,
        evaluation.profile,
        evaluation.errors,
        evaluation.provenance,
    )
    assert again.metrics_summary["p99_latency_ms"] == 1.0
