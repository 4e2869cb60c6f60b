"""Frozen fixtures of every released contract version decode with today's code.

The fixtures under fixtures/v<VERSION>/ were written once by write_fixtures.py when that
version was released and are never rewritten. Today's code must read both encodings,
agree between them, lose nothing on re-encoding, and see the values written.
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pool, json_format, message_factory, unknown_fields
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2

from contract_tests._producer import build_fixtures
from contract_tests._support import BASELINES, FIXTURES_DIR, baseline_pool

# service_pb2 imports every evald.v1 module, registering its types in the default pool.
from evald.v1 import enums_pb2, errors_pb2, event_pb2, result_pb2, service_pb2  # noqa: F401

MANIFEST = "MANIFEST.json"


def _cases() -> list[tuple[Path, str, str]]:
    cases = []
    for manifest in sorted(FIXTURES_DIR.glob(f"v*/{MANIFEST}")):
        fixtures = json.loads(manifest.read_text(encoding="utf-8"))["fixtures"]
        cases += [(manifest.parent, name, full_name) for name, full_name in fixtures.items()]
    return cases


CASES = _cases()


def _message_class(full_name: str) -> type[Message]:
    descriptor = descriptor_pool.Default().FindMessageTypeByName(full_name)
    return message_factory.GetMessageClass(descriptor)


def _load(version_dir: Path, name: str, full_name: str) -> tuple[Message, Message, bytes]:
    """(decoded from binary, decoded from JSON, the binary bytes)."""
    cls = _message_class(full_name)
    binary = (version_dir / f"{name}.binpb").read_bytes()
    from_json = json_format.Parse((version_dir / f"{name}.json").read_text("utf-8"), cls())
    return cls.FromString(binary), from_json, binary


def _decoded(version: str) -> dict[str, Message]:
    return {
        name: _load(version_dir, name, full_name)[0]
        for version_dir, name, full_name in CASES
        if version_dir.name == version
    }


def test_there_are_fixtures() -> None:
    assert (FIXTURES_DIR / "v1.0.0" / MANIFEST).is_file()
    assert len(CASES) >= 20


@pytest.mark.parametrize(
    ("version_dir", "name", "full_name"), CASES, ids=[f"{d.name}/{n}" for d, n, _ in CASES]
)
def test_fixture_decodes_losslessly(version_dir: Path, name: str, full_name: str) -> None:
    decoded, from_json, binary = _load(version_dir, name, full_name)
    # Every field ever written is still known (strict JSON parsing checks nested ones).
    assert len(unknown_fields.UnknownFieldSet(decoded)) == 0
    # Compared as JSON: Any payloads compare by bytes, and map order inside is free.
    assert json_format.MessageToDict(decoded) == json_format.MessageToDict(from_json)
    assert decoded.SerializeToString(deterministic=True) == binary


def _pluck(message: Message, path: str) -> Any:
    """The value at ``path``: dotted fields, ``[i]`` list indexes, ``[key]`` map keys."""
    value: Any = message
    for step in path.split("."):
        name, *keys = re.split(r"[\[\]]+", step.strip("]"))
        value = getattr(value, name)
        for key in keys:
            value = value[int(key)] if key.isdigit() else value[key]
    return value


_BOOTSTRAP_PERCENTILE = result_pb2.INTERVAL_METHOD_BOOTSTRAP_PERCENTILE
RESULT_SHELL = {
    "run_id": "run-0001",
    "model.provider": "simulated",
    "model.params.temperature": 0.0,
    "model.params.stop": ["\n\n"],
    "benchmark.content_sha256": "ab" * 32,
    "benchmark.record_count": 40,
    "metrics_summary[accuracy]": 0.75,
    "metric_uncertainty[accuracy].bootstrap.lower": 0.625,
    "metric_uncertainty[accuracy].bootstrap.upper": 0.875,
    "metric_uncertainty[accuracy].bootstrap.method": _BOOTSTRAP_PERCENTILE,
    "metric_uncertainty[accuracy].bootstrap.resamples": 1000,
    "metric_uncertainty[accuracy].bootstrap.seed": 12345,
    "metric_uncertainty[accuracy].analytic.method": result_pb2.INTERVAL_METHOD_WILSON,
    "execution_profile.samples_total": 80,
    "execution_profile.samples_failed": 2,
    "execution_profile.wall_time.seconds": 12,
    "execution_profile.wall_time.nanos": 500_000_000,
    "execution_profile.latency_p99_ms": 180.5,
    "execution_profile.ttft_p99_ms": 45.0,
    "execution_profile.rate_limited": 3,
    "execution_profile.effective_concurrency": 7.5,
    "repeat_stats.consistent_record_fraction": 0.9,
    "status": enums_pb2.RESULT_STATUS_PARTIAL_SUCCESS,
    "errors[0].reason": errors_pb2.ERROR_REASON_PROVIDER_TIMEOUT,
    "provenance.contract_version": "1.0.0",
    "provenance.bootstrap_seed": 12345,
    "provenance.dependencies[numpy]": "2.1.0",
    "created_time.seconds": 1735787058,
}

# The values write_fixtures.py wrote for v1.0.0, spelled out: a changed field number,
# type or JSON name makes one of these differ.
EXPECTED_V1_0_0: dict[str, dict[str, Any]] = {
    "result_classification": RESULT_SHELL
    | {
        "task_type": enums_pb2.TASK_TYPE_CLASSIFICATION,
        "classification.labels": ["negative", "positive"],
        "classification.confusion_matrix.rows[0].counts": [30, 8],
        "classification.confusion_matrix.rows[0].unmapped": 2,
        "classification.confusion_matrix.rows[1].counts": [10, 28],
        "classification.per_class[1].label": "positive",
        "classification.per_class[1].recall": 0.7,
        "classification.unmapped_outputs": 2,
        "classification.worst_examples[0].record_id": "r-0007",
    },
    "result_qa": RESULT_SHELL
    | {
        "task_type": enums_pb2.TASK_TYPE_QA,
        "qa.exact_match": 0.625,
        "qa.f1": 0.8125,
        "qa.no_answer_outputs": 2,
        "qa.worst_examples[0].note": "no overlap with any reference",
    },
    "result_ner": RESULT_SHELL
    | {
        "task_type": enums_pb2.TASK_TYPE_NER,
        "ner.per_type[0].entity_type": "LOC",
        "ner.per_type[0].predicted": 4,
        "ner.per_type[1].support": 4,
        "ner.unparseable_outputs": 1,
    },
    "result_summarization": RESULT_SHELL
    | {
        "task_type": enums_pb2.TASK_TYPE_SUMMARIZATION,
        "summarization.rouge[2].rouge_type": "rougeL",
        "summarization.rouge[2].recall": 0.5,
        "summarization.rouge[3].fmeasure": 0.375,
        "summarization.stemming": True,
        "summarization.worst_examples[0].score": 0.0625,
    },
    "result_generation": RESULT_SHELL
    | {
        "task_type": enums_pb2.TASK_TYPE_GENERATION,
        "generation.match_modes[1].match_mode": "regex",
        "generation.match_modes[1].correct": 12,
        "generation.worst_examples[0].repeat_index": 1,
    },
    "run": {
        "run_id": "run-0001",
        "state": enums_pb2.RUN_STATE_RUNNING,
        "spec.model_ids": ["sim-fast"],
        "spec.datasets[1].name": "qa-mini",
        "spec.max_concurrency": 16,
        "spec.repeat": 2,
        "spec.retry_policy.max_retries": 3,
        "spec.retry_policy.backoff[1].seconds": 2,
        "spec.retry_policy.jitter_fraction": 0.25,
        "spec.labels[team]": "search",
        "progress.counts.total": 160,
        "progress.counts.retrying": 4,
        "progress.tasks[0].result_status": enums_pb2.RESULT_STATUS_SUCCESS,
        "progress.tasks[1].state": enums_pb2.TASK_STATE_RUNNING,
        "progress.tasks[1].counts.failed_permanent": 2,
        "last_seq": 42,
    },
    "run_event_state_changed": {
        "seq": 1,
        "state_changed.state": enums_pb2.RUN_STATE_RUNNING,
        "state_changed.previous": enums_pb2.RUN_STATE_PENDING,
    },
    "run_event_progress": {
        "seq": 2,
        "progress.throughput_per_s": 12.5,
        "progress.eta.seconds": 5,
        "progress.completed_since_last": 50,
        "progress.progress.counts.succeeded": 96,
    },
    "run_event_task_scored": {
        "seq": 3,
        "task_scored.result.task_id": "task-classification",
        "task_scored.result.classification.confusion_matrix.rows[1].counts": [10, 28],
    },
    "run_event_sample_failed": {
        "seq": 4,
        "sample_failed.subtask_id": "st-0099",
        "sample_failed.attempts": 4,
        "sample_failed.error.reason": errors_pb2.ERROR_REASON_PROVIDER_HTTP_5XX,
    },
    "run_event_heartbeat": {"seq": 4, "heartbeat.current_seq": 4, "run_id": "run-0001"},
    "eval_error_dataset_invalid": {
        "category": errors_pb2.ERROR_CATEGORY_DATASET_INVALID,
        "reason": errors_pb2.ERROR_REASON_DATASET_FIELD_MISSING,
        "http_equivalent": 400,
        "retryable": False,
        "metadata[record_id]": "r-0002",
    },
    "eval_error_model_provider_error": {
        "category": errors_pb2.ERROR_CATEGORY_MODEL_PROVIDER_ERROR,
        "reason": errors_pb2.ERROR_REASON_PROVIDER_RATE_LIMITED,
        "http_equivalent": 502,
        "retryable": True,
    },
    "eval_error_eval_operator_error": {
        "category": errors_pb2.ERROR_CATEGORY_EVAL_OPERATOR_ERROR,
        "reason": errors_pb2.ERROR_REASON_SCORER_FAILED,
        "http_equivalent": 500,
    },
    "eval_error_request_invalid": {
        "category": errors_pb2.ERROR_CATEGORY_REQUEST_INVALID,
        "reason": errors_pb2.ERROR_REASON_RUN_NOT_FOUND,
        "http_equivalent": 404,
    },
    "sample": {
        "state": enums_pb2.SUBTASK_STATE_SUCCEEDED,
        "output": "Shakespeare",
        "scores[f1]": 1.0,
        "flags": ["retried"],
        "latency_ms": 88.5,
        "ttft_ms": 21.0,
        "completion_tokens": 3,
        "last_error.reason": errors_pb2.ERROR_REASON_PROVIDER_RATE_LIMITED,
    },
    "list_models_response": {
        "models[0].model_id": "sim-fast",
        "models[0].max_concurrency": 64,
        "models[0].timeout.seconds": 60,
        "models[0].default_params.max_tokens": 64,
        "models[0].streaming": True,
    },
    "upload_dataset_header": {
        "header.task_type": enums_pb2.TASK_TYPE_QA,
        "header.prompt_template": "Q: {question}\nA:",
        "header.request_id": "req-1",
    },
    "upload_dataset_chunk": {
        "chunk": b'{"id": "r-0001", "question": "Who wrote Hamlet?", "answers": ["Shakespeare"]}\n'
    },
    "upload_dataset_response": {
        "dataset.dataset_id": "ds-0001",
        "dataset.record_count": 40,
        "dataset.size_bytes": 4096,
        "created": True,
    },
    "create_run_request": {"request_id": "req-7", "spec.datasets[0].benchmark_version": "v1"},
    "watch_run_response": {"event.sample_failed.record_id": "r-0002"},
    "rpc_status_dataset_invalid": {"code": code_pb2.INVALID_ARGUMENT},
    "rpc_status_server_draining": {"code": code_pb2.UNAVAILABLE},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_V1_0_0))
def test_v1_0_0_fixture_values(name: str) -> None:
    message = _decoded("v1.0.0")[name]
    for path, expected in EXPECTED_V1_0_0[name].items():
        actual = _pluck(message, path)
        if not isinstance(actual, (str, bytes, int, float, bool)):
            actual = list(actual)
        assert actual == expected, path


def test_v1_0_0_values_cover_every_fixture() -> None:
    assert set(EXPECTED_V1_0_0) == set(_decoded("v1.0.0"))


def test_optional_fields_keep_presence() -> None:
    decoded = _decoded("v1.0.0")
    assert decoded["run"].spec.retry_policy.HasField("max_retries")
    assert decoded["run"].spec.generation_overrides.HasField("temperature")  # set to 0.0
    assert not decoded["run"].spec.generation_overrides.HasField("top_p")
    assert decoded["result_qa"].execution_profile.HasField("ttft_p50_ms")


def test_rpc_status_details_unpack() -> None:
    decoded = _decoded("v1.0.0")
    info = error_details_pb2.ErrorInfo()
    bad_request = error_details_pb2.BadRequest()
    retry = error_details_pb2.RetryInfo()
    invalid = decoded["rpc_status_dataset_invalid"]
    assert isinstance(invalid, status_pb2.Status)
    assert invalid.details[0].Unpack(info)
    assert (info.domain, info.reason, dict(info.metadata)) == (
        "evald",
        "DATASET_FIELD_MISSING",
        {"line": "12", "field": "label"},
    )
    assert invalid.details[1].Unpack(bad_request)
    assert bad_request.field_violations[0].field == "records[11].label"
    draining = decoded["rpc_status_server_draining"]
    assert isinstance(draining, status_pb2.Status)
    assert draining.details[1].Unpack(retry)
    assert retry.retry_delay.seconds == 2


def _all_decoded() -> list[Message]:
    return [_load(version_dir, name, full_name)[0] for version_dir, name, full_name in CASES]


def _results(messages: list[Message]) -> list[result_pb2.TaskEvaluationResult]:
    results = [m for m in messages if isinstance(m, result_pb2.TaskEvaluationResult)]
    events = [getattr(m, "event", m) for m in messages]
    return results + [e.task_scored.result for e in events if _kind(e) == "task_scored"]


def _kind(message: Message) -> str | None:
    if message.DESCRIPTOR.full_name != "evald.v1.RunEvent":
        return None
    return message.WhichOneof("kind")


def _assert_coverage(messages: list[Message], pool: descriptor_pool.DescriptorPool) -> None:
    """Every payload member, event kind and error category that ``pool`` declares occurs."""
    result = pool.FindMessageTypeByName("evald.v1.TaskEvaluationResult")
    payload = result.oneofs_by_name["payload"]
    assert {r.WhichOneof("payload") for r in _results(messages)} >= {f.name for f in payload.fields}
    kinds = pool.FindMessageTypeByName("evald.v1.RunEvent").oneofs_by_name["kind"]
    events = [getattr(m, "event", m) for m in messages]
    assert {_kind(e) for e in events} - {None} >= {f.name for f in kinds.fields}
    categories = {
        m.category  # type: ignore[attr-defined]
        for m in messages
        if m.DESCRIPTOR.full_name == "evald.v1.EvalError"
    }
    declared = pool.FindEnumTypeByName("evald.v1.ErrorCategory").values
    assert categories >= {v.number for v in declared} - {0}


def test_fixtures_cover_every_payload_event_kind_and_error_category_released() -> None:
    """The frozen fixtures cover everything the newest released contract declares. A
    member added since has its fixture frozen when the next version is cut (below)."""
    _assert_coverage(_all_decoded(), baseline_pool(BASELINES[-1]))


def test_the_producer_covers_every_payload_event_kind_and_error_category_of_today() -> None:
    """What write_fixtures will freeze at the next release covers today's contract."""
    _assert_coverage(list(build_fixtures().values()), descriptor_pool.Default())
