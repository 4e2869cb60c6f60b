"""The judge phase beside the answer phase, through a real server and the SDK with two
fake providers on loopback: judging overlaps inference under a run limit while the
answering model waits for its rate budget, the answers' execution profile covers the
answer phase only, and failed judge calls are listed where failed samples are."""

from pathlib import Path

import anyio
import pytest

from evald_client import AsyncEvaldClient, JudgeOptions, ResultStatus, SubtaskState
from evald_server.fake_provider import FakeChatRequest, FakeConfig, FakeProvider, JournalEntry
from tests.harness import running_server
from tests.judge._support import (
    N,
    RUBRIC,
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
            run, result, _ = await judged_run(
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
