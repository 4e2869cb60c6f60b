"""RescoreRun of a judged run: the source's verdicts are read again, never asked again.

Two fake providers on loopback (one answering, one judging with scripted verdicts, one
of them failing for good), a real server and SQLite file, the SDK: the rescored run's
judge metrics, coverage and per-sample judgements equal the source's, and neither
fake's journal grows.
"""

from pathlib import Path

import anyio
import pytest

from evald_client import AsyncEvaldClient, JudgeOptions, ResultStatus, RunState, Sample
from evald_server.fake_provider import FakeChatRequest, FakeConfig, FakeProvider
from tests.harness import running_server
from tests.judge._support import PASSING, RUBRIC, N, answer, judge_config, judged_run, record_of

pytestmark = pytest.mark.anyio

UNJUDGED = 4  # the record whose judge reply never parses: judged by nobody


def _judge(chat: FakeChatRequest) -> str:
    i = record_of(chat)
    if i == UNJUDGED:
        return "I would rather not say."
    return f"VERDICT: {'PASS' if i in PASSING else 'FAIL'}"


async def test_a_rescored_judged_run_reads_the_stored_verdicts_without_a_call(
    tmp_path: Path,
) -> None:
    async with (
        FakeProvider(answer=answer) as answering,
        FakeProvider(FakeConfig(latency_ms=2), answer=_judge) as judging,
    ):
        config = judge_config(tmp_path, answering, judging)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            source, source_result, source_samples = await judged_run(
                client, JudgeOptions(model_id="judge", rubric=RUBRIC, parse_retries=0), retries=0
            )
            assert source.state is RunState.PARTIAL  # one answer went unjudged
            asked = (len(answering.journal.entries), len(judging.journal.entries))

            run = await client.rescore_run(source.run_id, reducers=["mean"])
            assert run.spec.judge == source.spec.judge
            with anyio.fail_after(60):
                done = await client.wait(run.run_id)
            (result,) = await client.results(run.run_id)
            samples = [s async for s in client.samples(run.run_id)]

    assert (len(answering.journal.entries), len(judging.journal.entries)) == asked
    assert done.state is RunState.PARTIAL  # as the source: the same unjudged answer
    assert result.status is ResultStatus.PARTIAL_SUCCESS
    assert result.provenance.rescored_from_run_id == source.run_id
    judged = N - 1
    assert result.metrics["judge_pass_rate"] == len(PASSING - {UNJUDGED}) / judged
    assert result.metrics["judge_coverage"] == judged / N
    for name, value in source_result.metrics.items():
        if name.startswith("judge_"):
            assert result.metrics[name] == value, name
    assert [r.name for r in result.reduced] == ["mean"]

    assert _judgements(samples) == _judgements(source_samples)


def _judgements(samples: list[Sample]) -> list[tuple[str, float | None, bool | None, str]]:
    """Each answer's judgement: its record, score, pass and rationale."""
    return sorted(
        (s.record_id, s.judgement.score, s.judgement.passed, s.judgement.rationale)
        for s in samples
        if s.judgement is not None
    )
