"""``RunComparison`` (domain) → ``evald.v1.RunComparison``; ``ModelPair`` from proto."""

from typing import Any

from evald.v1 import comparison_pb2, result_pb2
from evald_server.api._convert_enums import to_proto_enum
from evald_server.comparison import (
    MetricComparison,
    ModelPair,
    RunComparison,
    TaskComparison,
    UnmatchedTask,
)


def model_pairs_from_proto(pairs: Any) -> list[ModelPair]:
    return [ModelPair(p.baseline_model_id, p.candidate_model_id) for p in pairs]


def _metric(metric: MetricComparison) -> comparison_pb2.MetricComparison:
    interval = metric.interval
    return comparison_pb2.MetricComparison(
        metric=metric.metric,
        baseline_value=metric.baseline,
        candidate_value=metric.candidate,
        delta=metric.delta,
        delta_interval=result_pb2.MetricInterval(
            lower=interval.lower,
            upper=interval.upper,
            confidence_level=interval.confidence_level,
            method=result_pb2.INTERVAL_METHOD_BOOTSTRAP_PERCENTILE,
            resamples=interval.resamples,
            seed=interval.seed,
        ),
        p_value=metric.p_value,
        test=to_proto_enum(metric.test),
        records_improved=metric.records_improved,
        records_worsened=metric.records_worsened,
        records_unchanged=metric.records_unchanged,
        record_score=metric.record_score,
    )


def _task(task: TaskComparison) -> comparison_pb2.TaskComparison:
    pairing = task.pairing
    return comparison_pb2.TaskComparison(
        baseline_task_id=task.baseline_task_id,
        candidate_task_id=task.candidate_task_id,
        baseline_model_id=task.baseline_model_id,
        candidate_model_id=task.candidate_model_id,
        dataset_name=task.dataset_name,
        benchmark_version=task.benchmark_version,
        task_type=to_proto_enum(task.task_type),
        paired_samples=pairing.samples,
        paired_records=pairing.records,
        baseline_only_records=pairing.baseline_only_records,
        candidate_only_records=pairing.candidate_only_records,
        baseline_only_record_ids=pairing.baseline_only_record_ids,
        candidate_only_record_ids=pairing.candidate_only_record_ids,
        metrics=[_metric(m) for m in task.metrics],
    )


def _unmatched(task: UnmatchedTask) -> comparison_pb2.UnmatchedTask:
    return comparison_pb2.UnmatchedTask(
        run_id=task.run_id,
        task_id=task.task_id,
        model_id=task.model_id,
        dataset_name=task.dataset_name,
        benchmark_version=task.benchmark_version,
    )


def comparison_to_proto(comparison: RunComparison) -> comparison_pb2.RunComparison:
    return comparison_pb2.RunComparison(
        baseline_run_id=comparison.baseline_run_id,
        candidate_run_id=comparison.candidate_run_id,
        task_pairing=to_proto_enum(comparison.task_pairing),
        tasks=[_task(t) for t in comparison.tasks],
        unmatched_tasks=[_unmatched(t) for t in comparison.unmatched_tasks],
        confidence_level=comparison.confidence_level,
        resamples=comparison.resamples,
        permutations=comparison.permutations,
        seed=comparison.seed,
    )
