"""Code datasets end to end through the real server, the SDK and the fake provider:
HumanEval problems answered right, wrong and with no code; the verdicts stored per
sample; pass@1 and pass@k in the result; CreateRun refused without the sandbox."""

from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from evald_cli._render import results_tables, samples_table
from evald_client import (
    CodePayload,
    EvaldError,
    ResultStatus,
    RetryPolicy,
    RunState,
    SubtaskState,
    TaskState,
)
from evald_server.fake_provider import Behaviour, FakeChatRequest
from tests.code_runs._support import code_server, fenced, humaneval_records, sandbox_table
from tests.sandbox._support import processes_of_uids, slot_uids

pytestmark = pytest.mark.anyio


def _subset() -> tuple[list[dict[str, Any]], dict[str, str], dict[str, str]]:
    """Six problems: three answered with their canonical solution (fenced, the whole
    function), two with a function that returns None (HumanEval/3's check compares it:
    an assertion fails; HumanEval/4's subtracts from it: TypeError), one with a shell
    block only. (records, answers, verdicts)"""
    records = humaneval_records()[:6]
    answers: dict[str, str] = {}
    expected: dict[str, str] = {}  # by record id: the line number (no "id" field)
    for i, record in enumerate(records):
        if i < 3:
            answers[record["prompt"]] = fenced(record["prompt"] + record["canonical_solution"])
            expected[str(i + 1)] = "passed"
        elif i < 5:
            wrong = f"def {record['entry_point']}(*args, **kwargs):\n    return None\n"
            answers[record["prompt"]] = fenced(wrong)
            expected[str(i + 1)] = "failed" if i == 3 else "error"
        else:
            answers[record["prompt"]] = "Run this:\n```bash\nrm -rf /\n```\n"
            expected[str(i + 1)] = "no_program"
    return records, answers, expected


async def test_a_humaneval_subset_passes_and_fails_through_the_server(tmp_path: Path) -> None:
    records, answers, expected = _subset()
    async with code_server(tmp_path, answers) as (client, _address, _fake):
        await client.upload_dataset(
            name="humaneval-6", version="1.0.0", task_type="code", records=records
        )
        run = await client.create_run(
            models=["fake"], datasets=[("humaneval-6", "1.0.0")], repeat=2, reducers=["pass@2"]
        )
        with anyio.fail_after(120):
            run = await client.wait(run.run_id)
        assert run.state is RunState.SUCCEEDED
        (result,) = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
    assert result.status is ResultStatus.SUCCESS
    payload = result.payload
    assert isinstance(payload, CodePayload)
    assert result.metrics["pass_at_1"] == pytest.approx(0.5)
    assert result.metrics["pass_at_2"] == pytest.approx(0.5)
    assert "pass_at_1" in result.intervals
    assert "pass_at_2" in result.intervals
    assert [(p.k, p.value, p.problems) for p in payload.pass_at_k] == [(1, 0.5, 6), (2, 0.5, 6)]
    counts = {v.verdict: v.samples for v in payload.verdicts}
    assert counts == {
        "passed": 6,
        "failed": 2,
        "error": 2,
        "timeout": 0,
        "resource_limit": 0,
        "no_program": 2,
    }
    assert payload.problems == 6
    assert len(samples) == 12
    for sample in samples:
        assert sample.state is SubtaskState.SUCCEEDED
        assert sample.execution is not None
        assert sample.execution.verdict == expected[sample.record_id], sample.execution
        assert sample.scores["passed"] == (1.0 if sample.execution.passed else 0.0)
    failed = next(s for s in samples if s.execution and s.execution.verdict == "failed")
    assert failed.execution is not None
    assert failed.execution.error_type == "AssertionError"
    assert failed.execution.extraction_rule == "fence"
    error = next(s for s in samples if s.execution and s.execution.verdict == "error")
    assert error.execution is not None
    assert error.execution.error_type == "TypeError"
    assert "TypeError" in error.execution.traceback
    assert len(error.execution.traceback) <= 4000
    assert processes_of_uids(slot_uids()) == []
    # `evald results` shows the code payload: pass@k with intervals, and the verdicts.
    console = Console(width=200, record=True)
    for table in results_tables([result]):
        console.print(table)
    shown = console.export_text()
    assert "humaneval-6@1.0.0 (code)" in shown
    assert "pass_at_1" in shown
    assert "pass_at_2" in shown
    assert "passed 6" in shown
    assert "no_program 2" in shown
    # `evald samples` shows each sample's verdict and its reason.
    console = Console(width=240, record=True)
    console.print(samples_table(samples, {}))
    listed = console.export_text()
    assert "failed: test 0 failed" in listed
    assert "no_program: the answer holds no code" in listed


async def test_create_run_is_refused_while_the_sandbox_is_off(tmp_path: Path) -> None:
    records, answers, _ = _subset()
    off = sandbox_table(enabled=False)
    async with code_server(tmp_path, answers, sandbox=off) as (client, _address, _fake):
        await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=records)
        with pytest.raises(EvaldError) as caught:
            await client.create_run(models=["fake"], datasets=[("he", "1.0.0")])
        assert caught.value.code == "FAILED_PRECONDITION"
        assert caught.value.reason == "SANDBOX_UNAVAILABLE"
        assert "[sandbox] enabled = false" in str(caught.value)


async def test_create_run_is_refused_when_bubblewrap_is_missing(tmp_path: Path) -> None:
    records, answers, _ = _subset()
    broken = sandbox_table(bwrap="/usr/bin/no-such-bwrap")
    async with code_server(tmp_path, answers, sandbox=broken) as (client, _address, _fake):
        await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=records)
        with pytest.raises(EvaldError) as caught:
            await client.create_run(models=["fake"], datasets=[("he", "1.0.0")])
        assert caught.value.reason == "SANDBOX_UNAVAILABLE"
        assert "bubblewrap is missing: no executable /usr/bin/no-such-bwrap" in str(caught.value)


async def test_a_bad_code_record_fails_the_upload_and_stores_nothing(tmp_path: Path) -> None:
    records, answers, _ = _subset()
    bad = [records[0], {"prompt": "def f():\n", "test": "assert True", "entry_point": "f"}]
    async with code_server(tmp_path, answers) as (client, _address, _fake):
        with pytest.raises(EvaldError) as caught:
            await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=bad)
        assert caught.value.code == "INVALID_ARGUMENT"
        assert "line 2" in str(caught.value)
        assert "check(candidate)" in str(caught.value)
        assert [d async for d in client.list_datasets()] == []


async def test_programs_run_while_the_task_is_still_answering(tmp_path: Path) -> None:
    """The sixth answer hangs (until the model's timeout, then it is asked again): the
    task cannot finish meanwhile, and the first answers' programs have run by then."""
    records = humaneval_records()[:6]
    answers = {r["prompt"]: fenced(r["prompt"] + r["canonical_solution"]) for r in records}
    async with code_server(tmp_path, answers, model_fields={"timeout_s": 10.0}) as (
        client,
        _address,
        fake,
    ):
        fake.configure(sequence=(*[Behaviour.ok()] * 5, Behaviour.hang()))
        await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=records)
        run = await client.create_run(
            models=["fake"],
            datasets=[("he", "1.0.0")],
            max_concurrency=1,
            retry_policy=RetryPolicy(max_retries=2, backoff_s=(0.01,), jitter_fraction=0.0),
        )
        executed: list[str] = []
        with anyio.fail_after(60):
            while not executed:
                # The task's state first: executions seen after it are seen while it was
                # still answering (its sixth answer hangs).
                (task,) = (await client.get_run(run.run_id)).progress.tasks
                assert task.state is TaskState.RUNNING, "the answers ended before any program ran"
                executed = [s.record_id async for s in client.samples(run.run_id) if s.execution]
                await anyio.sleep(0.05)
        assert task.counts.succeeded < 6
        with anyio.fail_after(120):
            run = await client.wait(run.run_id)
        assert run.state is RunState.SUCCEEDED
        (result,) = await client.results(run.run_id)
    assert result.metrics["pass_at_1"] == 1.0


async def test_two_code_runs_compare_on_their_stored_verdicts(tmp_path: Path) -> None:
    records = humaneval_records()[:6]
    right = {r["prompt"]: fenced(r["prompt"] + r["canonical_solution"]) for r in records}

    def answer(request: FakeChatRequest) -> str:
        prompt = request.last_content
        text = next(text for key, text in right.items() if key in prompt)
        if request.model == "worse" and records[0]["prompt"] not in prompt:
            return "```bash\necho no\n```"  # the worse model solves only the first problem
        return text

    async with code_server(tmp_path, {}, answer=answer, models=("better", "worse")) as (
        client,
        _address,
        _fake,
    ):
        await client.upload_dataset(name="he", version="1.0.0", task_type="code", records=records)
        finished = []
        for model in ("worse", "better"):
            run = await client.create_run(models=[model], datasets=[("he", "1.0.0")])
            with anyio.fail_after(120):
                finished.append(await client.wait(run.run_id))
        comparison = await client.compare_runs(
            baseline_run_id=finished[0].run_id,
            candidate_run_id=finished[1].run_id,
            model_pairs=[("worse", "better")],
        )
    (task,) = comparison.tasks
    metric = next(m for m in task.metrics if m.metric == "pass_at_1")
    assert (metric.baseline_value, metric.candidate_value) == (pytest.approx(1 / 6), 1.0)
    assert metric.records_improved == 5
    assert metric.records_worsened == 0
