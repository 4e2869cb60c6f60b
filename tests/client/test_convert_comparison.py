"""Every field of a RunComparison reaches the SDK's dataclasses; a newer enum value
reads as UNSPECIFIED."""

from google.protobuf.descriptor import FieldDescriptor

import evald_client as ec
from evald.v1 import comparison_pb2, enums_pb2, result_pb2
from evald_client._convert_comparison import comparison_from_proto, model_pair_to_proto


def _populated() -> comparison_pb2.RunComparison:
    metric = comparison_pb2.MetricComparison(
        metric="accuracy",
        baseline_value=0.9,
        candidate_value=0.6,
        delta=-0.3,
        delta_interval=result_pb2.MetricInterval(
            lower=-0.4, upper=-0.2, confidence_level=0.95,
            method=result_pb2.INTERVAL_METHOD_BOOTSTRAP_PERCENTILE, resamples=1000, seed=7,
        ),
        p_value=0.001, test=comparison_pb2.PAIRED_TEST_MCNEMAR_EXACT,
        records_improved=3, records_worsened=30, records_unchanged=67, record_score="correct",
    )  # fmt: skip
    task = comparison_pb2.TaskComparison(
        baseline_task_id="b-t0", candidate_task_id="c-t0", baseline_model_id="m1",
        candidate_model_id="m2", dataset_name="d", benchmark_version="1.0",
        task_type=enums_pb2.TASK_TYPE_CLASSIFICATION, paired_samples=100, paired_records=100,
        baseline_only_records=2, candidate_only_records=1,
        baseline_only_record_ids=["r1", "r2"], candidate_only_record_ids=["r9"],
        metrics=[metric],
    )  # fmt: skip
    return comparison_pb2.RunComparison(
        baseline_run_id="b", candidate_run_id="c",
        task_pairing=comparison_pb2.TASK_PAIRING_MODEL_POSITION, tasks=[task],
        unmatched_tasks=[comparison_pb2.UnmatchedTask(
            run_id="b", task_id="b-t1", model_id="m1", dataset_name="e", benchmark_version="2",
        )],
        confidence_level=0.95, resamples=1000, permutations=10000, seed=7,
    )  # fmt: skip


def _every_field_set(message: object) -> None:
    for field in message.DESCRIPTOR.fields:  # type: ignore[attr-defined]
        value = getattr(message, field.name)
        if field.is_repeated:
            assert len(value) > 0, field.full_name
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                for item in value:
                    _every_field_set(item)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            _every_field_set(value)
        else:
            assert value, field.full_name


def test_a_fully_populated_comparison_converts_field_by_field() -> None:
    message = _populated()
    _every_field_set(message)  # the fixture leaves no field at its default
    comparison = comparison_from_proto(message)
    assert comparison.task_pairing is ec.TaskPairing.MODEL_POSITION
    assert (comparison.resamples, comparison.permutations, comparison.seed) == (1000, 10000, 7)
    (task,) = comparison.tasks
    assert task.task_type is ec.TaskType.CLASSIFICATION
    assert (task.paired_samples, task.paired_records) == (100, 100)
    assert task.baseline_only_record_ids == ("r1", "r2")
    assert task.candidate_only_record_ids == ("r9",)
    metric = task.metric("accuracy")
    assert metric is not None
    assert metric.test is ec.PairedTest.MCNEMAR_EXACT
    assert metric.delta_interval.method is ec.IntervalMethod.BOOTSTRAP_PERCENTILE
    assert (metric.delta_interval.lower, metric.delta_interval.seed) == (-0.4, 7)
    assert (metric.records_improved, metric.records_worsened, metric.records_unchanged) == (
        3,
        30,
        67,
    )
    assert metric.record_score == "correct"
    assert metric.significant(0.05)
    assert not metric.significant(0.0005)
    assert comparison.unmatched_tasks == (
        ec.UnmatchedTask(
            run_id="b", task_id="b-t1", model_id="m1", dataset_name="e", benchmark_version="2"
        ),
    )


def test_enum_values_newer_than_the_client_read_as_unspecified() -> None:
    message = _populated()
    message.task_pairing = 99  # type: ignore[assignment]
    message.tasks[0].metrics[0].test = 42  # type: ignore[assignment]
    comparison = comparison_from_proto(message)
    assert comparison.task_pairing is ec.TaskPairing.UNSPECIFIED
    assert comparison.tasks[0].metrics[0].test is ec.PairedTest.UNSPECIFIED


def test_model_pairs_convert_to_proto() -> None:
    proto = model_pair_to_proto(ec.ModelPair("a", "b"))
    assert (proto.baseline_model_id, proto.candidate_model_id) == ("a", "b")
