"""A judged run cancelled while answers are in flight, then resumed: the answers that
succeeded after the cancel were never given judge subtasks (a cancelled run judges
nothing new); the resume that lifts the cancel judges them, so every answer is judged
and the task ends whole, not partial. Through real servers (a process, drained with
SIGTERM, then a restart on its store), the SDK and two fake providers on loopback."""

from pathlib import Path

import anyio
import pytest

from evald_client import AsyncEvaldClient, JudgeOptions, ResultStatus, RunState, SubtaskState
from evald_server.config import parse_config
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, FaultRate
from tests._shared import wait_for
from tests.harness import ServerProcess, running_server, write_config
from tests.judge._support import (
    PASSING,
    RECORDS,
    RUBRIC,
    N,
    answer,
    judge_config_data,
    pass_fail_judge,
)

pytestmark = pytest.mark.anyio

SLOTS = 4  # the answering model's max_concurrency (judge_config_data)
LATE = 6  # answers that come back before the cancel, written after it
# The first server writes outcomes at most this long after they arrive: the answers
# that came back before the cancel are unwritten when it commits, and its drain
# (SIGTERM) writes them at once.
HELD = {"commit_delay_s": 10.0, "commit_batch": 1000}


async def test_a_resumed_run_judges_the_answers_that_succeeded_after_its_cancel(
    tmp_path: Path,
) -> None:
    # LATE answers, then every call hangs until the cancel aborts it.
    first = FakeConfig(
        sequence=(Behaviour.ok(),) * LATE, faults=(FaultRate(Behaviour.hang(), 1.0),)
    )
    judge = JudgeOptions(model_id="judge", rubric=RUBRIC)
    async with (
        FakeProvider(first, answer=answer) as answering,
        FakeProvider(answer=pass_fail_judge) as judging,
    ):
        data = judge_config_data(tmp_path, answering, judging, engine=HELD)
        server = ServerProcess(write_config(tmp_path, data))
        try:
            address = await anyio.to_thread.run_sync(server.start)
            async with AsyncEvaldClient(address) as client:
                await client.upload_dataset(
                    name="arith", version="1.0.0", task_type="generation", records=RECORDS
                )
                run = await client.create_run(
                    models=["cand"], datasets=[("arith", "1.0.0")], judge=judge
                )

                async def all_slots_hang() -> bool:  # so every answer before them came back
                    return answering.journal.requests == LATE + SLOTS

                await wait_for(all_slots_hang)
                await client.cancel_run(run.run_id)
            assert await anyio.to_thread.run_sync(server.terminate) == 0
        finally:
            server.kill()
        assert "Traceback" not in server.stderr()

        # The restart scores what the drain wrote, then resumes the cancelled answers.
        restart = parse_config(judge_config_data(tmp_path, answering, judging))
        async with running_server(restart) as address, AsyncEvaldClient(address) as client:
            stopped = await client.wait(run.run_id, timeout_s=30)
            assert stopped.state is RunState.CANCELLED
            counts = stopped.progress.counts
            assert (counts.succeeded, counts.cancelled) == (LATE, N - LATE)
            assert counts.total == N, "the late answers got no judge subtasks"
            (cut,) = await client.results(run.run_id)
            assert cut.status is ResultStatus.PARTIAL_SUCCESS
            assert cut.provenance.judge is not None
            assert cut.provenance.judge.unjudged_samples == LATE

            answering.configure(FakeConfig())  # the provider answers again
            resumed = await client.retry_run(run.run_id, states=[SubtaskState.CANCELLED])
            assert resumed.requeued == N - LATE
            final = await client.wait(run.run_id, timeout_s=60)
            (result,) = await client.results(run.run_id)
            samples = [s async for s in client.samples(run.run_id)]
    assert final.state is RunState.SUCCEEDED
    assert result.status is ResultStatus.SUCCESS
    assert result.metrics["judge_coverage"] == 1.0
    assert result.metrics["judge_pass_rate"] == len(PASSING) / N
    judged = result.provenance.judge
    assert judged is not None
    assert (judged.judged_samples, judged.unjudged_samples) == (N, 0)
    assert len(samples) == N
    assert all(s.judgement is not None for s in samples), "every answer judged"
    # Each answer judged once; the hung calls asked again once the run resumed.
    assert judging.journal.requests == N
    assert set(judging.journal.counts().values()) == {1}
    assert answering.journal.requests == LATE + SLOTS + (N - LATE)
