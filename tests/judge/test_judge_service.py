"""Model-graded scoring end to end: a real gRPC server on 127.0.0.1 port 0 with a real
SQLite file, the SDK, and two fake providers on loopback — one answering, one judging
with scripted verdicts (and faults). The fakes' journals prove which calls reached them.
"""

from pathlib import Path

import anyio
import pytest

from evald_client import (
    AsyncEvaldClient,
    InvalidArgument,
    JudgeOptions,
    JudgeScoreFormat,
    NotFound,
    ResultStatus,
    RunState,
)
from evald_server.fake_provider import (
    Behaviour,
    FakeChatRequest,
    FakeConfig,
    FakeProvider,
    FaultRate,
)
from tests.harness import running_server
from tests.judge._support import (
    PASSING,
    RECORDS,
    RUBRIC,
    N,
    answer,
    judge_config,
    judged_run,
    pass_fail_judge,
    record_of,
)

pytestmark = pytest.mark.anyio


async def test_a_judged_run_computes_exactly_the_scripted_pass_rate(tmp_path: Path) -> None:
    async with (
        FakeProvider(answer=answer) as answering,
        FakeProvider(FakeConfig(latency_ms=5), answer=pass_fail_judge) as judging,
    ):
        config = judge_config(tmp_path, answering, judging)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            run, result, samples = await judged_run(
                client, JudgeOptions(model_id="judge", rubric=RUBRIC)
            )
        # Calibration: the computed pass rate is the scripted one, exactly.
        assert run.state is RunState.SUCCEEDED
        assert result.status is ResultStatus.SUCCESS
        assert result.metrics["judge_pass_rate"] == len(PASSING) / N
        assert result.metrics["judge_coverage"] == 1.0
        interval = result.intervals["judge_pass_rate"]
        assert interval.bootstrap.lower <= len(PASSING) / N <= interval.bootstrap.upper
        assert interval.analytic is not None
        assert 0.0 < interval.analytic.lower < interval.analytic.upper < 1.0
        # Per sample: the verdict and the rationale the judge gave.
        assert len(samples) == N
        for sample in samples:
            i = int(sample.record_id[1:])
            assert sample.judgement is not None, sample
            assert sample.judgement.passed is (i in PASSING)
            assert sample.judgement.score == (1.0 if i in PASSING else 0.0)
            assert sample.judgement.rationale == (
                f"Record {i} looks {'right' if i in PASSING else 'wrong'}."
            )
            assert sample.judgement.rounds == 1
            assert sample.subtask_id.count(".j") == 0, "ListSamples lists the answers"
        # Provenance and the judge's own execution profile.
        judge = result.provenance.judge
        assert judge is not None
        assert (judge.model_id, judge.provider_model, judge.rounds) == ("judge", "judge-llm", 1)
        assert judge.score_format is JudgeScoreFormat.PASS_FAIL
        assert len(judge.rubric_sha256) == 64
        assert (judge.judged_samples, judge.unjudged_samples) == (N, 0)
        assert result.judge_execution is not None
        assert result.judge_execution.samples_total == N
        assert result.judge_execution.requests == N
        assert result.execution.samples_total == N, "answers are counted apart"
        # The journals: one call per answer on each provider; the judge saw each answer,
        # never more calls at once than the judge model's max_concurrency.
        assert answering.journal.requests == N
        assert judging.journal.requests == N
        assert all(key.endswith(".j0") for key in judging.journal.counts())
        assert set(judging.journal.counts().values()) == {1}
        assert judging.journal.peak_concurrency("judge-llm") <= 2


async def test_judge_faults_are_retried_and_an_unparseable_verdict_is_a_sample_error(
    tmp_path: Path,
) -> None:
    unparseable = 4  # the judge never gives record 4 a verdict line

    def judge(chat: FakeChatRequest) -> str:
        if record_of(chat) == unparseable:
            return "I would rather not say."
        return pass_fail_judge(chat)

    faults = FakeConfig(faults=(FaultRate(Behaviour.error(503), 0.3),), seed=3)
    async with (
        FakeProvider(answer=answer) as answering,
        FakeProvider(faults, answer=judge) as judging,
    ):
        config = judge_config(tmp_path, answering, judging)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            _, result, samples = await judged_run(
                client, JudgeOptions(model_id="judge", rubric=RUBRIC, parse_retries=2), retries=8
            )
        failed_calls = judging.journal.outcomes().get("http_503", 0)
        assert failed_calls > 0, "the fault mix hit the judge"
        assert answering.journal.outcomes().get("http_503", 0) == 0
        by_record = {int(s.record_id[1:]): s for s in samples}
        broken = by_record[unparseable].judgement
        assert broken is not None
        assert broken.passed is None
        assert broken.error is not None
        assert broken.error.reason == "JUDGE_VERDICT_UNPARSEABLE"
        # A reply without a verdict is asked for again while the judge subtask has made at
        # most parse_retries attempts (a 503 spends one too), and given up after: so at
        # most parse_retries + 1 such replies are paid for, the last one the final call.
        (key,) = [k for k in judging.journal.counts() if k.split(".")[-3] == str(unparseable)]
        attempts = [e for e in judging.journal.entries if e.key == key]
        replies = [e.attempt for e in attempts if e.outcome == "ok"]
        assert 1 <= len(replies) <= 3, [(e.attempt, e.outcome) for e in attempts]
        assert all(a < 2 for a in replies[:-1])
        assert replies[-1] >= 2
        assert attempts[-1].attempt == replies[-1], "nothing is asked after giving up"
        assert attempts[-1].outcome == "ok"
        # The rest is judged, faults or not; the pass rate is over the judged ones.
        judged = [i for i in range(N) if i != unparseable]
        assert all(by_record[i].judgement.passed is (i in PASSING) for i in judged)  # type: ignore[union-attr]
        assert result.metrics["judge_pass_rate"] == len(PASSING - {unparseable}) / len(judged)
        assert result.metrics["judge_coverage"] == len(judged) / N, "beside it: the unjudged"
        assert result.provenance.judge is not None
        assert result.provenance.judge.unjudged_samples == 1
        assert result.status is ResultStatus.PARTIAL_SUCCESS
        assert "JUDGE_VERDICT_UNPARSEABLE" in {e.reason for e in result.errors}
        assert result.judge_execution is not None
        assert result.judge_execution.retries >= failed_calls


async def test_repeat_k_judging_on_a_scale_reports_mean_and_agreement(tmp_path: Path) -> None:
    def scale_judge(chat: FakeChatRequest) -> str:
        i = record_of(chat)
        judge_round = int((chat.key or "").rsplit(".j", 1)[1])
        # Records below 5 get 5, 5, 5; the others 4, 2, 4 (the rounds disagree).
        score = 5 if i < 5 else (2 if judge_round == 1 else 4)
        return f"Fine.\nSCORE: {score}"

    async with (
        FakeProvider(answer=answer) as answering,
        FakeProvider(answer=scale_judge) as judging,
    ):
        config = judge_config(tmp_path, answering, judging)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            options = JudgeOptions(
                model_id="judge",
                rubric=RUBRIC,
                score_format=JudgeScoreFormat.SCALE,
                scale_min=1,
                scale_max=5,
                pass_threshold=4,
                rounds=3,
            )
            _, result, samples = await judged_run(client, options)
        assert judging.journal.requests == 3 * N
        low = 5  # records 0-4
        assert result.metrics["judge_score_mean"] == pytest.approx(
            (low * 5 + (N - low) * 10 / 3) / N
        )
        assert result.metrics["judge_pass_rate"] == low / N  # 10/3 < 4 fails
        assert result.metrics["judge_agreement_rate"] == low / N
        assert "judge_agreement_rate" in result.intervals
        for sample in samples:
            i = int(sample.record_id[1:])
            assert sample.judgement is not None
            assert sample.judgement.rounds == 3
            assert sample.judgement.agreed is (i < low)


async def test_a_bad_judge_spec_is_refused_naming_the_field(tmp_path: Path) -> None:
    async with FakeProvider() as answering, FakeProvider() as judging:
        config = judge_config(tmp_path, answering, judging)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="arith", version="1.0.0", task_type="generation", records=RECORDS
            )
            with pytest.raises(InvalidArgument) as bad:
                await client.create_run(
                    models=["cand"],
                    datasets=[("arith", "1.0.0")],
                    judge=JudgeOptions(model_id="judge", rubric="Is {answer} right?"),
                )
            fields = {v.field for v in bad.value.field_violations}
            assert fields == {"spec.judge.rubric"}
            assert "{answer}" in str(bad.value)
            with pytest.raises(NotFound) as missing:
                await client.create_run(
                    models=["cand"],
                    datasets=[("arith", "1.0.0")],
                    judge=JudgeOptions(model_id="no-such-judge"),
                )
            assert "no-such-judge" in str(missing.value)
            assert [r async for r in client.list_runs()] == []
        assert answering.journal.requests == judging.journal.requests == 0


async def test_the_judge_model_limit_is_shared_with_its_other_uses(tmp_path: Path) -> None:
    async with (
        FakeProvider(answer=answer) as answering,
        FakeProvider(FakeConfig(latency_ms=20), answer=pass_fail_judge) as judging,
    ):
        config = judge_config(tmp_path, answering, judging)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            await client.upload_dataset(
                name="arith", version="1.0.0", task_type="generation", records=RECORDS
            )
            # One run evaluates the judge model itself while another is judged by it.
            direct = await client.create_run(models=["judge"], datasets=[("arith", "1.0.0")])
            judged = await client.create_run(
                models=["cand"],
                datasets=[("arith", "1.0.0")],
                judge=JudgeOptions(model_id="judge", rubric=RUBRIC),
            )
            with anyio.fail_after(60):
                for run in (direct, judged):
                    assert (await client.wait(run.run_id)).state is RunState.SUCCEEDED
        assert judging.journal.requests == 2 * N
        assert {k.endswith(".j0") for k in judging.journal.counts()} == {True, False}
        assert judging.journal.peak_concurrency("judge-llm") <= 2, "max_concurrency 2, shared"
