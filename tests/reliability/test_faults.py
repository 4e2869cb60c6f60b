"""30 % mixed provider faults under a short retry policy: nothing is lost, every sample
ends succeeded or failed_permanent with the right category and reasons, and the fake's
journal holds exactly the attempts the policy allows and the store records.

The fake draws each fault from a hash of (seed, request key, attempt), so the fate of
every attempt of every subtask is known in advance: the test computes it with the
fake's own ``FakeConfig.choose`` and holds evald to it sample by sample.
"""

import itertools
from dataclasses import dataclass
from pathlib import Path

import pytest

from evald_client import AsyncEvaldClient, ErrorCategory, RetryPolicy, Sample, SubtaskState
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate, Kind
from tests._shared import classification_records
from tests.harness import make_config, running_server
from tests.reliability._support import check_run_in_store, db_path

pytestmark = pytest.mark.anyio

RETRY_AFTER_S = 0.2
# A fake call takes 5 ms and a hang 60 s; the model's timeout sits far from both, so a
# call slowed by a loaded machine (over 1 s, seen at load 13) is never taken for a hang.
TIMEOUT_S = 5.0
HANG_S = 60.0
FAULTS = (
    FaultRate(Behaviour.rate_limited(retry_after_s=RETRY_AFTER_S), 0.06),
    FaultRate(Behaviour.error(500), 0.04),
    FaultRate(Behaviour.error(502), 0.04),
    FaultRate(Behaviour.error(503), 0.04),
    FaultRate(Behaviour.hang(), 0.04),  # hangs past the model's timeout_s
    FaultRate(Behaviour.reset(), 0.04),
    FaultRate(Behaviour.malformed(), 0.04),
)
REASONS = {
    "http_429": "PROVIDER_RATE_LIMITED",
    "http_500": "PROVIDER_HTTP_5XX",
    "http_502": "PROVIDER_HTTP_5XX",
    "http_503": "PROVIDER_HTTP_5XX",
    "hang": "PROVIDER_TIMEOUT",
    "reset": "PROVIDER_CONNECTION_ERROR",
    "malformed": "PROVIDER_BAD_RESPONSE",
}


@dataclass(frozen=True)
class Fate:
    """What the policy must make of one subtask, given the fake's draws."""

    labels: tuple[str, ...]  # the outcome of each attempt made

    @property
    def succeeded(self) -> bool:
        return self.labels[-1] == "ok"

    @property
    def failures(self) -> tuple[str, ...]:
        return tuple(label for label in self.labels if label != "ok")


def fate(config: FakeConfig, key: str, max_retries: int) -> Fate:
    labels: list[str] = []
    for attempt in range(1 + max_retries):
        behaviour = config.choose(0, key, attempt)
        labels.append("ok" if behaviour.kind is Kind.OK else behaviour.label)
        if behaviour.kind is Kind.OK:
            break
    return Fate(tuple(labels))


async def _run_with_faults(
    tmp_path: Path, *, records: int, models: int, max_retries: int, seed: int
) -> None:
    config = FakeConfig(latency_ms=5.0, faults=FAULTS, hang_s=HANG_S, seed=seed)
    policy = RetryPolicy(
        max_retries=max_retries, backoff_s=(0.05,), jitter_fraction=0.0, retry_after_cap_s=0.5
    )
    async with FakeProvider(config) as fake:
        model_ids = [f"m{i}" for i in range(models)]
        server_config = make_config(
            tmp_path,
            models=[
                fake.model_config(m, max_concurrency=16, timeout_s=TIMEOUT_S).model_dump()
                for m in model_ids
            ],
        )
        async with running_server(server_config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=classification_records(records),
            )
            run = await client.create_run(
                models=model_ids, datasets=[("reviews", "1.0.0")], retry_policy=policy
            )
            final = await client.wait(run.run_id, timeout_s=500)
            samples = [s async for s in client.samples(run.run_id, page_size=500)]

        total = records * models
        assert len(samples) == total, "no sample lost"
        assert len({s.subtask_id for s in samples}) == total
        fates = {s.subtask_id: fate(config, s.subtask_id, max_retries) for s in samples}
        for sample in samples:
            _check_sample(sample, fates[sample.subtask_id], fake, max_retries)

        failed = sum(not f.succeeded for f in fates.values())
        assert 0 < failed < total, "the mix must produce both outcomes to test anything"
        assert final.progress.counts.succeeded == total - failed
        assert final.progress.counts.failed_permanent == failed
        assert final.state.value == "partial"
        check = check_run_in_store(db_path(tmp_path), run.run_id, expected_subtasks=total)
        assert check.states == {"succeeded": total - failed, "failed_permanent": failed}
        assert fake.journal.duplicates_after_success() == {}
        # Every attempt the draws call for was made (nothing skipped, nothing extra).
        assert fake.journal.requests == sum(len(f.labels) for f in fates.values())
        _check_retry_after_honoured(fake, fates)


def _check_sample(sample: Sample, expected: Fate, fake: FakeProvider, max_retries: int) -> None:
    made = fake.journal.count(sample.subtask_id)
    assert made <= 1 + max_retries
    assert made == sample.attempts == len(expected.labels), sample.subtask_id
    if expected.succeeded:
        assert sample.state is SubtaskState.SUCCEEDED, sample
        assert sample.output
    else:
        assert sample.state is SubtaskState.FAILED_PERMANENT, sample
    if not expected.failures:
        assert sample.first_error is None
        assert sample.last_error is None
        return
    assert sample.first_error is not None
    assert sample.last_error is not None
    assert sample.first_error.reason == REASONS[expected.failures[0]], sample
    assert sample.last_error.reason == REASONS[expected.failures[-1]], sample
    for error in (sample.first_error, sample.last_error):
        assert error.category is ErrorCategory.MODEL_PROVIDER_ERROR
        assert error.retryable


def _check_retry_after_honoured(fake: FakeProvider, fates: dict[str, Fate]) -> None:
    """After a 429 with Retry-After, the next attempt waited at least that long."""
    by_key: dict[str, list[tuple[float, float | None, str]]] = {}
    for entry in fake.journal.entries:
        assert entry.key is not None
        by_key.setdefault(entry.key, []).append(
            (entry.started_at, entry.finished_at, entry.outcome)
        )
    checked = 0
    for key, attempts in by_key.items():
        assert [a[2] for a in attempts] == list(fates[key].labels)
        for (_, finished, outcome), (started, _, _) in itertools.pairwise(attempts):
            if outcome == "http_429":
                assert finished is not None
                assert started - finished >= RETRY_AFTER_S - 0.01, key
                checked += 1
    assert checked > 0


# The fates hang on the run's random subtask ids, so the size is what makes both
# outcomes certain: a subtask fails permanently with p = 0.3 ** (1 + max_retries), and
# no failure at all has probability (1 - p) ** subtasks: 1.6 % at 150 records (seen
# here), < 1e-7 at these sizes.
@pytest.mark.timeout(600)  # a backstop: each hang costs TIMEOUT_S
async def test_thirty_percent_mixed_faults(tmp_path: Path) -> None:
    await _run_with_faults(tmp_path, records=600, models=1, max_retries=2, seed=7)


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_thirty_percent_mixed_faults_two_models_more_retries(tmp_path: Path) -> None:
    await _run_with_faults(tmp_path, records=1000, models=2, max_retries=3, seed=11)
