"""kill -9 of the server during the judge phase, restart on the same SQLite file.

The fake provider runs as its own process (its journal outlives every evald process),
answering for the evaluated model and, as a scripted judge, for the judge model. After
the restart the run completes with one judge subtask per answer, no judge call whose
verdict was stored before the kill is made again, and an answer is paid for twice only
if it came within moments of the kill (in flight, or held by the group commit).
"""

import json
import subprocess
from pathlib import Path

import pytest

from evald_client import JudgeOptions, RetryPolicy
from evald_server.fake_provider import FakeProcess
from tests._shared import classification_records, wait_for
from tests.reliability._rig import Rig
from tests.reliability._support import fake_model, query, server_config

pytestmark = pytest.mark.anyio

RECORDS = 240
VERDICT = "The label is supported.\nVERDICT: PASS"


def _judge_keys(db: Path, *, state: str = "succeeded") -> set[str]:
    rows = query(
        db,
        "SELECT task_id, record_idx, repeat_index, judge_round FROM subtasks "
        "WHERE phase = 1 AND state = ?",
        (state,),
    )
    return {f"{t}.{r}.{k}.j{j}" for t, r, k, j in rows}


async def test_kill_during_the_judge_phase_repeats_no_stored_verdict(tmp_path: Path) -> None:
    fake_config = {"model_answers": {"judge-llm": VERDICT}}
    args = ("--port", "0", "--latency-ms", "15", "--config-json", json.dumps(fake_config))
    async with FakeProcess(*args, stderr=subprocess.DEVNULL) as fake:
        models = [
            fake_model(fake.base_url, "cand", model="cand-llm", max_concurrency=8),
            fake_model(fake.base_url, "judge", model="judge-llm", max_concurrency=2),
        ]
        the_rig = Rig(tmp_path, fake, server_config(tmp_path, models))
        try:
            address = await the_rig.start()
            async with the_rig.client(address) as client:
                await client.upload_dataset(
                    name="reviews",
                    version="1.0.0",
                    task_type="classification",
                    records=classification_records(RECORDS),
                )
                run = await client.create_run(
                    models=["cand"],
                    datasets=[("reviews", "1.0.0")],
                    judge=JudgeOptions(model_id="judge"),
                    retry_policy=RetryPolicy(max_retries=3, backoff_s=(0.05,)),
                )

            async def a_third_judged() -> bool:
                return len(_judge_keys(the_rig.db)) >= RECORDS // 3

            await wait_for(a_third_judged, timeout_s=90, every_s=0.01)
            crash = await the_rig.kill()
            judged_at_kill = _judge_keys(the_rig.db)
            assert RECORDS // 3 <= len(judged_at_kill) < RECORDS, "killed mid judge phase"
            in_flight_at_kill = _judge_keys(the_rig.db, state="running")

            await the_rig.start()
            final = await the_rig.finish(run.run_id, timeout_s=120)
            assert final.state.value == "succeeded"
            async with the_rig.client() as client:
                (result,) = await client.results(run.run_id)
            journal = await fake.control.journal()
            # No judge call whose verdict was stored at the kill was made again, and a
            # verdict was paid for twice only if it was not durable at the kill.
            after = {e.key for e in journal if e.seq > crash.journal_boundary}
            assert after & judged_at_kill == set()
            await the_rig.assert_no_finished_work_repeated(crash)
            judge_calls = [e for e in journal if e.model == "judge-llm"]
            repeated = {e.key for e in judge_calls if e.attempt > 0}
            assert repeated <= in_flight_at_kill, "only calls in flight at the kill repeat"
            # Judging overlaps inference: it starts as soon as the first answers succeed.
            answers = [e for e in journal if e.model == "cand-llm" and e.finished_at]
            first_judged = min(e.started_at for e in judge_calls)
            assert first_judged < max(e.finished_at or 0.0 for e in answers)
        finally:
            for server in the_rig.servers:
                server.kill()

    # One judge subtask per answer, each terminal and succeeded, counted in the task.
    per_answer = query(
        the_rig.db,
        "SELECT judged_row_id, COUNT(*) FROM subtasks WHERE phase = 1 GROUP BY judged_row_id",
    )
    assert len(per_answer) == RECORDS
    assert {count for _, count in per_answer} == {1}
    assert query(the_rig.db, "SELECT total, succeeded FROM tasks") == [(2 * RECORDS, 2 * RECORDS)]
    assert result.metrics["judge_pass_rate"] == 1.0
    assert result.provenance.judge is not None
    assert result.provenance.judge.judged_samples == RECORDS
    assert result.judge_execution is not None
    assert result.judge_execution.samples_succeeded == RECORDS
