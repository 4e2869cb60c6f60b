"""The judge phase beside the answer phase, through a real server and the SDK with two
fake providers on loopback: judging overlaps inference under a run limit while the
answering model waits for its rate budget, the answers' execution profile covers the
answer phase only, and failed judge calls are listed where failed samples are."""

from pathlib import Path

import anyio
import pytest

from evald_cli.main import main
from evald_client import AsyncEvaldClient, JudgeOptions, ResultStatus, RunState, SubtaskState
from evald_server.fake_provider import FakeChatRequest, FakeConfig, FakeProvider, JournalEntry
from tests.harness import running_server
from tests.judge._support import (
    RUBRIC,
    N,
    answer,
    judge_config,
    judged_run,
    pass_fail_judge,
    record_of,
)

pytestmark = pytest.mark.anyio


async def test_judging_overlaps_inference_under_a_run_limit_and_a_rate_budget(
    tmp_path: Path,
) -> None:
    # The answering model is held by its request budget (about one call every 0.1 s,
    # one deep): its calls wait for budget, and the run limit (2) must not be held by
    # those waits, or no judge call starts until the last answer has gone out.
    budget = {"requests_per_minute": 600, "budget_burst_s": 0.1}
    async with (
        FakeProvider(answer=answer) as answering,
        FakeProvider(answer=pass_fail_judge) as judging,
    ):
        config = judge_config(tmp_path, answering, judging, cand=budget)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            _, result, _ = await judged_run(
                client, JudgeOptions(model_id="judge", rubric=RUBRIC), max_concurrency=2
            )
    assert result.status is ResultStatus.SUCCESS
    assert answering.journal.requests == judging.journal.requests == N
    answers_started = sorted(e.started_at for e in answering.journal.entries)
    judges_started = sorted(e.started_at for e in judging.journal.entries)
    # Order of events: judge calls went out while answer calls were still to come.
    # Order of events: judging began in the first half of inference, while half of the
    # answer calls were still to go out (the answers' budget spaces them out).
    assert judges_started[0] < answers_started[N // 2], (judges_started, answers_started)
    # The run limit held across both models: never more than 2 of its calls at once.
    calls = [*answering.journal.entries, *judging.journal.entries]
    assert _peak_in_flight(calls) <= 2


def _peak_in_flight(entries: list[JournalEntry]) -> int:
    """The most calls the providers saw in flight at once, from the journals' order."""
    edges = sorted(
        [(e.started_at, 1) for e in entries]
        + [(e.finished_at or e.started_at, -1) for e in entries],
        key=lambda edge: (edge[0], edge[1]),  # an end before a start at the same instant
    )
    peak = current = 0
    for _, step in edges:
        current += step
        peak = max(peak, current)
    return peak


async def test_the_answers_profile_covers_the_answer_phase_only(tmp_path: Path) -> None:
    # A slow judge, one call at a time: the judge phase runs on well after the answers.
    async with (
        FakeProvider(answer=answer) as answering,
        FakeProvider(FakeConfig(latency_ms=20), answer=pass_fail_judge) as judging,
    ):
        config = judge_config(tmp_path, answering, judging, judge={"max_concurrency": 1})
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            _, result, _ = await judged_run(client, JudgeOptions(model_id="judge", rubric=RUBRIC))
    answers, judge = result.execution, result.judge_execution
    assert judge is not None
    # Every judge call ends after the answer it grades was stored, the last one after
    # the last answer: the answers' wall ends there, the judge's runs on.
    assert 0.0 < answers.wall_time_s < judge.wall_time_s
    # The answers' rates are over their own wall time.
    assert answers.tokens_per_second == pytest.approx(
        answers.completion_tokens / answers.wall_time_s
    )
    assert answers.completion_tokens > 0
    assert 0.0 < answers.effective_concurrency <= 4.0  # the answering model's limit


async def test_failed_judge_calls_are_listed_with_the_failed_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unparseable = 4  # the judge never gives record 4 a verdict line

    def judge(chat: FakeChatRequest) -> str:
        if record_of(chat) == unparseable:
            return "I would rather not say."
        return pass_fail_judge(chat)

    report = tmp_path / "report.html"
    async with (
        FakeProvider(answer=answer) as answering,
        FakeProvider(answer=judge) as judging,
    ):
        config = judge_config(tmp_path, answering, judging)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            run, result, samples = await judged_run(
                client, JudgeOptions(model_id="judge", rubric=RUBRIC, parse_retries=0)
            )
            listed = client.samples(run.run_id, state=SubtaskState.FAILED_PERMANENT)
            failed = [s async for s in listed]

            def cli(*argv: str) -> str:
                assert main([*argv, "--server", address]) == 0
                return capsys.readouterr().out

            table = await anyio.to_thread.run_sync(cli, "samples", run.run_id, "--failed")
            await anyio.to_thread.run_sync(cli, "report", run.run_id, "-o", str(report))
    # Every answer succeeded: the judge call alone made the run partial.
    assert run.state is RunState.PARTIAL
    assert result.status is ResultStatus.PARTIAL_SUCCESS
    assert {s.state for s in samples} == {SubtaskState.SUCCEEDED}
    (call,) = failed
    assert (call.record_id, call.model_id, call.judge_round) == (f"r{unparseable}", "judge", 0)
    assert call.subtask_id.endswith(".j0")
    assert call.state is SubtaskState.FAILED_PERMANENT
    assert call.last_error is not None
    assert call.last_error.reason == "JUDGE_VERDICT_UNPARSEABLE"
    assert all(s.judge_round is None for s in samples), "unfiltered: the answers"
    # The CLI's failed-sample table and the report's failures show it too.
    assert f"r{unparseable} (judge round 0)" in table
    assert "JUDGE_VERDICT_UNPARS" in table  # the error column, clipped to its width
    assert "judge: JUDGE_VERDICT_UNPARSEABLE" in report.read_text(encoding="utf-8")
