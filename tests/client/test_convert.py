"""Every proto field reaches its typed object; unknown enum values degrade gracefully."""

from datetime import UTC, datetime

import pytest

import evald_client as ec
from evald.v1 import enums_pb2, errors_pb2, event_pb2, run_pb2
from evald_client._convert_common import (
    category_to_proto,
    eval_error_from_proto,
    run_state_to_proto,
    subtask_state_to_proto,
    task_type_from_proto,
    task_type_to_proto,
)
from evald_client._convert_events import event_from_proto
from evald_client._convert_results import result_from_proto
from evald_client._convert_runs import run_from_proto, run_spec_from_proto
from tests.client import _protos


def test_a_fully_populated_result_converts_field_by_field() -> None:
    result = result_from_proto(_protos.result("t-1", "sim-a", 0.9))
    assert result.task_type is ec.TaskType.CLASSIFICATION
    assert result.model == ec.ModelIdentity(
        model_id="sim-a",
        provider="simulated",
        provider_model="sim-a",
        params=ec.GenerationParams(temperature=0.0, stop=("\n",)),
    )
    assert result.benchmark.version == "1.0"
    assert result.benchmark.record_count == 10
    assert result.metrics == {"accuracy": 0.9, "f1_macro": pytest.approx(0.85)}
    interval = result.intervals["accuracy"]
    assert interval.bootstrap is not None
    assert interval.bootstrap.method is ec.IntervalMethod.BOOTSTRAP_PERCENTILE
    assert interval.bootstrap.lower == pytest.approx(0.8)
    assert interval.bootstrap.resamples == 1000
    assert interval.preferred is interval.bootstrap
    profile = result.execution
    assert profile.wall_time_s == pytest.approx(2.5)
    assert profile.scoring_time_s == pytest.approx(0.02)
    assert profile.ttft_p50_ms == pytest.approx(12.0)
    assert profile.ttft_p99_ms is None  # unset optional stays None, not 0
    assert (profile.latency_p50_ms, profile.latency_p99_ms) == (58.0, 95.5)
    assert result.repeat_stats == ec.RepeatStats(
        repeats=2, records=10, mean_within_record_stddev=0.1, consistent_record_fraction=0.8
    )
    assert result.status is ec.ResultStatus.PARTIAL_SUCCESS
    assert result.errors[0].reason == "PROVIDER_TIMEOUT"
    assert result.errors[0].metadata == {"timeout_s": "30"}
    assert result.provenance.dependencies == {"numpy": "2.0"}
    assert result.provenance.scorer == "classification@1"
    assert result.created_time == datetime.fromtimestamp(1_700_000_000, tz=UTC)
    payload = result.payload
    assert isinstance(payload, ec.ClassificationPayload)
    assert payload.confusion_matrix.rows == ((5, 1), (0, 3))
    assert payload.confusion_matrix.unmapped == (0, 1)
    assert payload.per_class[0] == ec.ClassMetrics(
        label="positive", precision=1.0, recall=0.83, f1=0.91, support=6
    )
    assert payload.worst_examples[0].truncated is True
    assert payload.worst_examples[0].note.startswith("predicted 'negative'")


@pytest.mark.parametrize(
    ("field", "message", "expected"),
    [
        ("qa", {"exact_match": 0.5, "f1": 0.6, "answered": 3}, ec.QaPayload),
        ("ner", {"per_type": [{"entity_type": "PER", "f1": 0.7, "support": 4}]}, ec.NerPayload),
        (
            "summarization",
            {"rouge": [{"rouge_type": "rougeL", "fmeasure": 0.4}], "stemming": True},
            ec.SummarizationPayload,
        ),
        (
            "generation",
            {"match_modes": [{"match_mode": "numeric", "samples": 20, "correct": 17}]},
            ec.GenerationPayload,
        ),
        (
            "multiple_choice",
            {
                "accuracy": 0.5,
                "unmapped_outputs": 1,
                "letters": [{"letter": "A", "gold": 2, "predicted": 3, "correct": 1}],
                "subjects": [{"subject": "law", "samples": 2, "correct": 1, "accuracy": 0.5}],
                "subject_macro_accuracy": 0.5,
                "extraction_rules": [{"rule": "logprobs", "samples": 2}],
                "logprob_scored": 2,
                "logprob_fallbacks": 1,
            },
            ec.MultipleChoicePayload,
        ),
    ],
)
def test_each_payload_kind_converts(field: str, message: dict[str, object], expected: type) -> None:
    proto = _protos.result()
    proto.ClearField("classification")
    getattr(proto, field).MergeFrom(type(getattr(proto, field))(**message))
    payload = result_from_proto(proto).payload
    assert isinstance(payload, expected)
    if isinstance(payload, ec.NerPayload):
        assert payload.per_type[0].entity_type == "PER"
    if isinstance(payload, ec.GenerationPayload):
        assert payload.match_modes[0] == ec.MatchModeStats(
            match_mode="numeric", samples=20, correct=17
        )
    if isinstance(payload, ec.MultipleChoicePayload):
        assert payload.letters == (
            ec.ChoiceLetterStats(letter="A", gold=2, predicted=3, correct=1),
        )
        assert payload.subjects[0] == ec.SubjectAccuracy(
            subject="law", samples=2, correct=1, accuracy=0.5
        )
        assert payload.extraction_rules == (ec.ExtractionRuleCount(rule="logprobs", samples=2),)
        assert (payload.logprob_scored, payload.logprob_fallbacks) == (2, 1)
        assert (payload.accuracy, payload.unmapped_outputs) == (0.5, 1)


def test_a_failed_result_has_no_payload() -> None:
    proto = _protos.result()
    proto.ClearField("classification")
    proto.ClearField("repeat_stats")
    result = result_from_proto(proto)
    assert result.payload is None
    assert result.repeat_stats is None


def test_unknown_enum_values_read_as_unspecified_and_unknown_reasons_keep_their_number() -> None:
    run = _protos.run()
    run.state = 99  # type: ignore[assignment]
    assert run_from_proto(run).state is ec.RunState.UNSPECIFIED
    error = errors_pb2.EvalError(reason=250, category=9)  # type: ignore[arg-type]
    typed = eval_error_from_proto(error)
    assert typed.reason == "UNKNOWN_250"
    assert typed.category is ec.ErrorCategory.UNSPECIFIED


def test_an_unknown_event_kind_is_skipped_and_a_heartbeat_carries_the_current_seq() -> None:
    assert event_from_proto(event_pb2.RunEvent(seq=3, run_id="r")) is None
    beat = event_from_proto(_protos.heartbeat("r", 41))
    assert isinstance(beat, ec.Heartbeat)
    assert beat.seq == 41


def test_enums_round_trip_with_the_contract() -> None:
    for member in ec.TaskType:
        assert task_type_from_proto(task_type_to_proto(member)) is member
    for state in ec.RunState:
        value = run_state_to_proto(state)
        assert enums_pb2.RunState.Name(value) == f"RUN_STATE_{state.name}"
    for sub in ec.SubtaskState:
        assert enums_pb2.SubtaskState.Name(subtask_state_to_proto(sub)).endswith(sub.name)
    for category in ec.ErrorCategory:
        name = errors_pb2.ErrorCategory.Name(category_to_proto(category))
        assert name == f"ERROR_CATEGORY_{category.name}"


def test_sdk_enums_cover_every_contract_value() -> None:
    pairs = [
        (ec.TaskType, enums_pb2.TaskType, "TASK_TYPE_"),
        (ec.RunState, enums_pb2.RunState, "RUN_STATE_"),
        (ec.TaskState, enums_pb2.TaskState, "TASK_STATE_"),
        (ec.SubtaskState, enums_pb2.SubtaskState, "SUBTASK_STATE_"),
        (ec.ResultStatus, enums_pb2.ResultStatus, "RESULT_STATUS_"),
        (ec.ErrorCategory, errors_pb2.ErrorCategory, "ERROR_CATEGORY_"),
        (ec.ShotFormat, enums_pb2.ShotFormat, "SHOT_FORMAT_"),
        (ec.ChoiceScoring, enums_pb2.ChoiceScoring, "CHOICE_SCORING_"),
        (ec.ChoiceContinuation, enums_pb2.ChoiceContinuation, "CHOICE_CONTINUATION_"),
        (ec.PromptFormat, enums_pb2.PromptFormat, "PROMPT_FORMAT_"),
    ]
    for sdk, proto, prefix in pairs:
        assert {m.name for m in sdk} == {
            n.removeprefix(prefix) for n in proto.DESCRIPTOR.values_by_name
        }


def test_run_progress_counts() -> None:
    run = run_from_proto(_protos.run(done=4))
    task = run.progress.tasks[0]
    assert task.counts.finished == 4
    assert task.counts.success_rate == 1.0
    assert ec.SubtaskCounts().success_rate is None
    spec = run_spec_from_proto(run_pb2.RunSpec())
    assert spec.repeat == 1  # 0 on the wire means 1
    assert spec.max_concurrency is None
