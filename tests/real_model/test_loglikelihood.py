"""Loglikelihood scoring against the real llama-cpp-python 0.3.36 server: its echo is
inconsistent (the generated token left out of the tokens, every log-probability one
position late), and evald must detect and report that — every sample failed with the
provider inconsistency named, none scored. The same questions in the plain prompt
format (/v1/completions, no chat template) are answered and scored from the legacy
logprobs block, so the completions endpoint itself is in use and sound."""

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from evald_client import (
    AsyncEvaldClient,
    ChoiceScoring,
    DatasetOptions,
    DatasetRef,
    GenerationParams,
    PromptFormat,
    RunState,
    SubtaskState,
)
from tests.harness import make_config, running_server
from tests.real_model.conftest import MODEL_ALIAS
from tests.real_model.test_smollm2 import REPORT_ENV, _records

pytestmark = pytest.mark.anyio

LOGLIKELIHOOD_SET = "general-knowledge-loglikelihood"
PLAIN_SET = "general-knowledge-plain"


async def test_the_inconsistent_echo_is_reported_not_scored(
    llama_server: str, tmp_path: Path
) -> None:
    records = _records("general_knowledge_mc.jsonl")
    model = {
        "id": "smollm2",
        "provider": "openai",
        "base_url": llama_server,
        "model": MODEL_ALIAS,
        "endpoints": ["chat", "completions"],
        "max_concurrency": 1,  # the server decodes one request at a time
        "timeout_s": 120,
        "params": {"temperature": 0.0, "seed": 0},
    }
    config = make_config(tmp_path, models=[model], limits={"max_inflight": 1})
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        for name in (LOGLIKELIHOOD_SET, PLAIN_SET):
            await client.upload_dataset(
                name=name, version="1.0.0", task_type="multiple_choice", records=records
            )
        run = await client.create_run(
            models=["smollm2"],
            datasets=[(LOGLIKELIHOOD_SET, "1.0.0"), (PLAIN_SET, "1.0.0")],
            name="real-model-loglikelihood",
            dataset_options=[
                DatasetOptions(
                    dataset=DatasetRef(LOGLIKELIHOOD_SET, "1.0.0"),
                    choice_scoring=ChoiceScoring.LOGLIKELIHOOD,
                ),
                DatasetOptions(
                    dataset=DatasetRef(PLAIN_SET, "1.0.0"),
                    choice_scoring=ChoiceScoring.LOGPROBS,
                    prompt_format=PromptFormat.PLAIN,
                    generation=GenerationParams(max_tokens=1),
                ),
            ],
        )
        final = await client.wait(run.run_id, timeout_s=600)
        results = {r.benchmark.name: r for r in await client.results(run.run_id)}
        samples = [s async for s in client.samples(run.run_id)]
    by_task: dict[str, list[Any]] = {}
    for sample in samples:
        by_task.setdefault(sample.task_id, []).append(sample)

    # Loglikelihood: every sample failed after its first call, the inconsistency named.
    scored = results[LOGLIKELIHOOD_SET]
    failed = by_task[scored.task_id]
    assert len(failed) == len(records)
    assert {s.state for s in failed} == {SubtaskState.FAILED_PERMANENT}
    for sample in failed:
        error = sample.last_error
        assert error is not None
        assert error.reason == "PROVIDER_BAD_RESPONSE"
        assert error.metadata["inconsistency"] == "echo_tokens", error.message
        assert "reassemble" in error.message
        assert sample.attempts == 1
    assert "acc" not in scored.metrics
    assert scored.execution.requests == len(records)  # the first choice's call each

    # The plain prompt over /v1/completions: answered, read from its logprobs block.
    plain = results[PLAIN_SET]
    answered = by_task[plain.task_id]
    assert {s.state for s in answered} == {SubtaskState.SUCCEEDED}
    assert plain.provenance.prompt_format is PromptFormat.PLAIN
    letters = [s.scores["predicted_index"] for s in answered]
    accuracy = sum(s.scores["predicted_index"] == s.scores["gold_index"] for s in answered) / len(
        answered
    )
    assert plain.metrics["accuracy"] == pytest.approx(accuracy)
    assert final.state is RunState.PARTIAL  # one task failed whole, one succeeded

    report = os.environ.get(REPORT_ENV)
    if report:
        figures = {
            "loglikelihood": {
                "samples": len(failed),
                "failed_inconsistent": sum(
                    s.last_error is not None
                    and s.last_error.metadata.get("inconsistency") == "echo_tokens"
                    for s in failed
                ),
                "first_error": failed[0].last_error.message if failed[0].last_error else "",
            },
            "plain_logprobs": {
                "accuracy": round(accuracy, 4),
                "predicted_letters": "".join(sorted("ABCD"[int(i)] for i in letters if i >= 0)),
                "latency_p50_ms": round(plain.execution.latency_p50_ms, 1),
            },
        }
        path = Path(report).with_name("real_model_loglikelihood.json")
        await anyio.Path(path).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
