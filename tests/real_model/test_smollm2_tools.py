"""A real model's tool calls and JSON answers through the whole service: SmolLM2-135M-
Instruct behind llama-cpp-python's server answers a few tool-call records (a named
tool_choice, which the server enforces with a grammar over the function's parameters,
and one "auto", which its default chat handler ignores: no call) and a few
structured-output records, once with the schema as response_format json_object (the
server's grammar) and once by the prompt alone, streamed. Every per-sample score is
recomputed from the output read back through ListSamples (tool calls by the scorer's
rules on the stored calls; JSON validity by json and jsonschema directly) and every
headline metric from the per-sample scores. The figures go to
``out/real_model_tools.json`` under ``make test-real-model``."""

import json
import os
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from evald_client import AsyncEvaldClient, ResultStatus, RunState, Sample, TaskResult
from evald_server.scoring._structured import parse_answer
from evald_server.scoring._tool_calls import FLAGS, sample_verdict
from tests.harness import make_config, running_server
from tests.real_model.conftest import MODEL_ALIAS

# llama-cpp-python samples under a grammar slowly (here ~2 s a token on 2 busy cores,
# 25-35 s a call): 12 calls need more than the tier's default 600 s on a loaded machine.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(1500)]

DATA = Path(__file__).parent / "data"
REPORT_ENV = "EVALD_REAL_MODEL_REPORT"


def _records(name: str) -> dict[str, dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return {r["id"]: r for r in (json.loads(line) for line in lines if line.strip())}


def _model(model_id: str, base_url: str, *, stream: bool, schema_format: str) -> dict[str, Any]:
    return {
        "id": model_id,
        "provider": "openai",
        "base_url": base_url,
        "model": MODEL_ALIAS,
        "max_concurrency": 1,  # llama-cpp-python decodes one request at a time
        "stream": stream,
        "timeout_s": 120,
        "structured_output_format": schema_format,
        "params": {"temperature": 0.0, "seed": 0, "max_tokens": 32},
    }


def _check_tool_calls(
    result: TaskResult, samples: list[Sample], records: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    for sample in samples:
        scores, flags = sample_verdict(sample.output, records[sample.record_id])
        assert dict(sample.scores) == pytest.approx(scores), sample.record_id
        # The sample's flags also hold what the provider boundary flagged.
        assert tuple(f for f in sample.flags if f in FLAGS) == flags, sample.record_id
    n = len(samples)
    matched = sum(s.scores["matched_calls"] for s in samples)
    made = sum(s.scores["calls_made"] for s in samples)
    expected = sum(s.scores["calls_expected"] for s in samples)
    precision = matched / made if made else 0.0
    recall = matched / expected
    again = {
        "exact_match": sum(s.scores["exact_match"] for s in samples) / n,
        "argument_accuracy": sum(s.scores["argument_accuracy"] for s in samples) / n,
        "call_precision": precision,
        "call_recall": recall,
        "call_f1": 2 * precision * recall / (precision + recall) if matched else 0.0,
    }
    assert {k: result.metrics[k] for k in again} == pytest.approx(again, abs=1e-12)
    # The named tool_choice records came back as calls (the server's grammar).
    named = [s for s in samples if records[s.record_id]["tool_choice"] != "auto"]
    assert all(s.scores["calls_made"] == 1 for s in named), [s.output for s in named]
    return {**again, "calls_made": made, "flags": {s.record_id: s.flags for s in samples}}


def _check_structured(
    result: TaskResult, samples: list[Sample], records: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    for sample in samples:
        record = records[sample.record_id]
        try:
            answer = parse_answer(sample.output)
        except ValueError:
            assert sample.scores["json_valid"] == 0.0, sample.output
            continue
        assert sample.scores["json_valid"] == 1.0, sample.output
        valid = jsonschema.Draft202012Validator(record["json_schema"]).is_valid(answer)
        assert sample.scores["schema_valid"] == float(valid), sample.output
        assert sample.scores["field_exact_match"] == float(answer == record["reference"])
    n = len(samples)
    again = {
        "json_valid_rate": sum(s.scores["json_valid"] for s in samples) / n,
        "schema_valid_rate": sum(s.scores["schema_valid"] for s in samples) / n,
        "field_exact_match": sum(s.scores["field_exact_match"] for s in samples) / n,
        "field_f1": sum(s.scores["field_f1"] for s in samples) / n,
    }
    assert {k: result.metrics[k] for k in again} == pytest.approx(again, abs=1e-12)
    return again


async def test_smollm2_tool_calls_and_structured_outputs(llama_server: str, tmp_path: Path) -> None:
    tools = _records("tool_calls.jsonl")
    structured = _records("structured.jsonl")
    models = [
        _model("smollm2-schema", llama_server, stream=False, schema_format="json_object"),
        _model("smollm2-prompt", llama_server, stream=True, schema_format="prompt"),
    ]
    config = make_config(tmp_path, models=models, limits={"max_inflight": 1})
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        await client.upload_dataset(
            name="tools", version="1.0.0", task_type="tool_call", records=list(tools.values())
        )
        await client.upload_dataset(
            name="json",
            version="1.0.0",
            task_type="structured_output",
            records=list(structured.values()),
        )
        run = await client.create_run(
            models=[m["id"] for m in models],
            datasets=[("tools", "1.0.0"), ("json", "1.0.0")],
            name="real-model-tools",
        )
        final = await client.wait(run.run_id, timeout_s=1400)
        results = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]

    report = os.environ.get(REPORT_ENV)
    path = None if not report else anyio.Path(report).with_name("real_model_tools.json")
    if path is not None:  # what came back, before any check, for a failure's reader
        raw = {s.record_id + "@" + s.model_id: [s.output, s.flags] for s in samples}
        await path.write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")
    assert final.state is RunState.SUCCEEDED, final
    figures: dict[str, Any] = {}
    for result in results:
        assert result.status is ResultStatus.SUCCESS
        mine = [s for s in samples if s.task_id == result.task_id]
        if result.benchmark.name == "tools":
            checked = _check_tool_calls(result, mine, tools)
        else:
            checked = _check_structured(result, mine, structured)
        figures[f"{result.model.model_id}/{result.benchmark.name}"] = {
            **{k: round(v, 4) if isinstance(v, float) else v for k, v in checked.items()},
            "latency_p50_ms": round(result.execution.latency_p50_ms, 1),
            "outputs": {s.record_id: s.output for s in mine},
        }
    # With its grammar the server's JSON follows the schema.
    assert figures["smollm2-schema/json"]["schema_valid_rate"] == 1.0
    if path is not None:
        await path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
