"""``evald.v1.RunComparison`` → the SDK's dataclasses; ``ModelPair`` → proto."""

from evald.v1 import comparison_pb2, enums_pb2
from evald_client._comparison import (
    MetricComparison,
    ModelPair,
    PairedTest,
    RunComparison,
    TaskComparison,
    TaskPairing,
    UnmatchedTask,
)
from evald_client._convert_common import enum_from_proto
from evald_client._convert_results import interval_from_proto
from evald_client._enums import TaskType


def model_pair_to_proto(pair: ModelPair) -> comparison_pb2.ModelPair:
    return comparison_pb2.ModelPair(
        baseline_model_id=pair.baseline_model_id, candidate_model_id=pair.candidate_model_id
    )


def _metric(message: comparison_pb2.MetricComparison) -> MetricComparison:
    return MetricComparison(
        metric=message.metric,
        baseline_value=message.baseline_value,
        candidate_value=message.candidate_value,
        delta=message.delta,
        delta_interval=interval_from_proto(message.delta_interval),
        p_value=message.p_value,
        test=enum_from_proto(PairedTest, comparison_pb2.PairedTest, message.test, "PAIRED_TEST_"),
        records_improved=message.records_improved,
        records_worsened=message.records_worsened,
        records_unchanged=message.records_unchanged,
        record_score=message.record_score,
    )


def _task(message: comparison_pb2.TaskComparison) -> TaskComparison:
    return TaskComparison(
        baseline_task_id=message.baseline_task_id,
        candidate_task_id=message.candidate_task_id,
        baseline_model_id=message.baseline_model_id,
        candidate_model_id=message.candidate_model_id,
        dataset_name=message.dataset_name,
        benchmark_version=message.benchmark_version,
        task_type=enum_from_proto(TaskType, enums_pb2.TaskType, message.task_type, "TASK_TYPE_"),
        paired_samples=message.paired_samples,
        paired_records=message.paired_records,
        baseline_only_records=message.baseline_only_records,
        candidate_only_records=message.candidate_only_records,
        baseline_only_record_ids=tuple(message.baseline_only_record_ids),
        candidate_only_record_ids=tuple(message.candidate_only_record_ids),
        metrics=tuple(_metric(m) for m in message.metrics),
    )


def _unmatched(message: comparison_pb2.UnmatchedTask) -> UnmatchedTask:
    return UnmatchedTask(
        run_id=message.run_id,
        task_id=message.task_id,
        model_id=message.model_id,
        dataset_name=message.dataset_name,
        benchmark_version=message.benchmark_version,
    )


def comparison_from_proto(message: comparison_pb2.RunComparison) -> RunComparison:
    return RunComparison(
        baseline_run_id=message.baseline_run_id,
        candidate_run_id=message.candidate_run_id,
        task_pairing=enum_from_proto(
            TaskPairing, comparison_pb2.TaskPairing, message.task_pairing, "TASK_PAIRING_"
        ),
        tasks=tuple(_task(t) for t in message.tasks),
        unmatched_tasks=tuple(_unmatched(t) for t in message.unmatched_tasks),
        confidence_level=message.confidence_level,
        resamples=message.resamples,
        permutations=message.permutations,
        seed=message.seed,
    )
