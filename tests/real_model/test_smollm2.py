"""A real model through the whole service: SmolLM2-135M-Instruct (llama-cpp-python's
OpenAI-compatible server on loopback) answers an MMLU-like multiple-choice set and a
few GSM8K-like word problems, streamed and not, and every figure of the results is
recomputed here from the stored samples."""

import json
import os
import re
import time
from collections import defaultdict
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
    MultipleChoicePayload,
    PromptOptions,
    ResultStatus,
    RunState,
    Sample,
    ShotFormat,
    TaskResult,
)
from tests.harness import make_config, running_server
from tests.real_model.conftest import MODEL_ALIAS

pytestmark = pytest.mark.anyio

DATA = Path(__file__).parent / "data"
REPORT_ENV = "EVALD_REAL_MODEL_REPORT"
MODELS = ("smollm2", "smollm2-stream")
MC_SETS = ("general-knowledge", "general-knowledge-chat", "general-knowledge-logprobs")
LOGPROBS_SET = "general-knowledge-logprobs"
_LEADING_LETTER = re.compile(r"^\(?([A-D])(?:[.):]|\s|$)")


def _records(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _model(model_id: str, base_url: str, *, stream: bool) -> dict[str, Any]:
    return {
        "id": model_id,
        "provider": "openai",
        "base_url": base_url,
        "model": MODEL_ALIAS,
        # llama-cpp-python's server decodes one request at a time and, with its default
        # interrupt_requests, ends a stream in progress ("data: [DONE]", no
        # finish_reason) when another request arrives: one call at a time keeps every
        # answer whole (with limits.max_inflight = 1 across both model entries).
        "max_concurrency": 1,
        "stream": stream,
        "timeout_s": 120,
        "params": {"temperature": 0.0, "seed": 0, "max_tokens": 48},
    }


def _logprob_choice(sample: Sample) -> int | None:
    """The most likely letter among the stored per-letter log-probabilities."""
    found = {"ABCD".index(k[-1]): v for k, v in sample.scores.items() if k.startswith("logprob_")}
    return None if not found else max(found, key=lambda i: (found[i], -i))


def _check_multiple_choice(
    result: TaskResult,
    samples: list[Sample],
    records: dict[str, dict[str, Any]],
    *,
    logprobs: bool = False,
) -> dict[str, Any]:
    payload = result.payload
    assert isinstance(payload, MultipleChoicePayload)
    assert len(samples) == len(records)
    gold = {rid: "ABCD".index(r["answer_letter"]) if "answer_letter" in r else r["answer_index"]
            for rid, r in records.items()}  # fmt: skip
    predicted: dict[str, int] = {}
    for sample in samples:
        # No answer is silently empty: an empty or unreadable one is flagged.
        assert sample.output.strip() or "unmapped_output" in sample.flags, sample
        assert sample.expected.startswith("ABCD"[gold[sample.record_id]] + ". ")
        predicted[sample.record_id] = int(sample.scores["predicted_index"])
        assert (predicted[sample.record_id] == -1) == ("unmapped_output" in sample.flags)
        by_logprob = _logprob_choice(sample)
        if logprobs:
            # Every sample has its letters' log-probabilities, or is a counted fallback.
            assert (by_logprob is None) == ("logprob_fallback" in sample.flags), sample
        else:
            assert by_logprob is None
        leading = _LEADING_LETTER.match(sample.output.strip())
        if by_logprob is not None:
            assert predicted[sample.record_id] == by_logprob, sample
        elif leading is not None:  # letter first: "B. The ..." is B, whatever follows
            assert predicted[sample.record_id] == "ABCD".index(leading.group(1)), sample.output
    right = {rid: predicted[rid] == gold[rid] for rid in records}
    accuracy = sum(right.values()) / len(right)
    unmapped = sum(p == -1 for p in predicted.values()) / len(predicted)
    assert result.metrics["accuracy"] == pytest.approx(accuracy)
    assert result.metrics["unmapped_rate"] == pytest.approx(unmapped)
    by_subject: dict[str, list[bool]] = defaultdict(list)
    for rid, record in records.items():
        by_subject[record["metadata"]["subject"]].append(right[rid])
    per_subject = {s: sum(v) / len(v) for s, v in by_subject.items()}
    assert {s.subject: s.accuracy for s in payload.subjects} == pytest.approx(per_subject)
    macro = sum(per_subject.values()) / len(per_subject)
    assert result.metrics["subject_macro_accuracy"] == pytest.approx(macro)
    for index, letter in enumerate(payload.letters):
        assert letter.gold == sum(g == index for g in gold.values())
        assert letter.predicted == sum(p == index for p in predicted.values())
    fallbacks = sum("logprob_fallback" in s.flags for s in samples)
    assert payload.logprob_fallbacks == fallbacks
    assert payload.logprob_scored == (len(samples) - fallbacks if logprobs else 0)
    if logprobs:
        assert payload.logprob_scored > 0, "the server sent log-probabilities"
    return {
        "accuracy": accuracy,
        "unmapped_rate": unmapped,
        "subject_macro_accuracy": macro,
        "logprob_fallbacks": fallbacks,
        "predicted_letters": "".join(s.letter * s.predicted for s in payload.letters),
    }


def _check_generation(result: TaskResult, samples: list[Sample]) -> dict[str, Any]:
    for sample in samples:
        assert sample.output.strip() or "no_number" in sample.flags, sample
    accuracy = sum(s.scores["correct"] for s in samples) / len(samples)
    assert result.metrics["accuracy"] == pytest.approx(accuracy)
    return {"accuracy": accuracy}


async def test_smollm2_end_to_end(llama_server: str, tmp_path: Path) -> None:
    mc_records = _records("general_knowledge_mc.jsonl")
    problems = _records("word_problems.jsonl")
    models = [
        _model("smollm2", llama_server, stream=False),
        _model("smollm2-stream", llama_server, stream=True),
    ]
    config = make_config(tmp_path, models=models, limits={"max_inflight": 1})
    started = time.perf_counter()
    async with running_server(config) as address, AsyncEvaldClient(address) as client:
        # The same questions zero-shot in one user message, and with a system message
        # and two solved examples as chat turns.
        await client.upload_dataset(
            name="general-knowledge",
            version="1.0.0",
            task_type="multiple_choice",
            records=mc_records,
        )
        await client.upload_dataset(
            name="general-knowledge-chat",
            version="1.0.0",
            task_type="multiple_choice",
            records=mc_records,
            prompt=PromptOptions(
                system_message="You are a careful expert. Reply with one letter.",
                shots=2,
                shot_seed=0,
                shot_format=ShotFormat.CHAT_TURNS,
            ),
        )
        # Once more, scored by the letter tokens' log-probabilities (one token).
        await client.upload_dataset(
            name=LOGPROBS_SET, version="1.0.0", task_type="multiple_choice", records=mc_records
        )
        await client.upload_dataset(
            name="word-problems", version="1.0.0", task_type="generation", records=problems
        )
        run = await client.create_run(
            models=list(MODELS),
            datasets=[(name, "1.0.0") for name in (*MC_SETS, "word-problems")],
            name="real-model",
            dataset_options=[
                DatasetOptions(
                    dataset=DatasetRef(name, "1.0.0"), generation=GenerationParams(max_tokens=6)
                )
                for name in MC_SETS
                if name != LOGPROBS_SET
            ]
            + [
                DatasetOptions(
                    dataset=DatasetRef(LOGPROBS_SET, "1.0.0"),
                    generation=GenerationParams(max_tokens=1),
                    choice_scoring=ChoiceScoring.LOGPROBS,
                )
            ],
        )
        final = await client.wait(run.run_id, timeout_s=600)
        results = await client.results(run.run_id)
        samples = [s async for s in client.samples(run.run_id)]
    wall_s = time.perf_counter() - started

    assert final.state is RunState.SUCCEEDED, final
    figures: dict[str, Any] = {"wall_s": round(wall_s, 2), "tasks": {}}
    mc_by_id = {r["id"]: r for r in mc_records}
    for result in results:
        assert result.status is ResultStatus.SUCCESS
        task_samples = [s for s in samples if s.task_id == result.task_id]
        streamed = result.model.model_id == "smollm2-stream"
        assert (result.execution.ttft_p50_ms is not None) == streamed
        if result.benchmark.name == LOGPROBS_SET:
            assert result.model.params.max_tokens == 1
            checked = _check_multiple_choice(result, task_samples, mc_by_id, logprobs=True)
        elif result.benchmark.name in MC_SETS:
            assert result.model.params.max_tokens == 6
            checked = _check_multiple_choice(result, task_samples, mc_by_id)
        else:
            assert result.model.params.max_tokens == 48
            checked = _check_generation(result, task_samples)
        figures["tasks"][f"{result.model.model_id}/{result.benchmark.name}"] = {
            **{k: round(v, 4) if isinstance(v, float) else v for k, v in checked.items()},
            "ttft_p50_ms": result.execution.ttft_p50_ms,
            "latency_p50_ms": round(result.execution.latency_p50_ms, 1),
            "wall_s": round(result.execution.wall_time_s, 2),
            "outputs": {s.record_id: s.output for s in task_samples},
        }
    report = os.environ.get(REPORT_ENV)
    if report:
        await anyio.Path(report).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
