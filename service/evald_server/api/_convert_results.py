"""TaskEvaluation (the engine's result) → evald.v1.TaskEvaluationResult."""

from evald.v1 import model_pb2, result_pb2
from evald_server.api._convert_common import (
    cost_to_proto,
    duration,
    eval_error_to_proto,
    params_to_proto,
    timestamp,
)
from evald_server.api._convert_enums import to_proto_enum
from evald_server.api._convert_judge import judge_provenance_to_proto
from evald_server.api._convert_scores import apply_score_report, reduced_metric_to_proto
from evald_server.engine import ExecutionProfile, TaskEvaluation


def _profile(profile: ExecutionProfile) -> result_pb2.ExecutionProfile:
    message = result_pb2.ExecutionProfile(
        samples_total=profile.samples_total,
        samples_succeeded=profile.samples_succeeded,
        samples_failed=profile.samples_failed,
        samples_cancelled=profile.samples_cancelled,
        wall_time=duration(profile.wall_time_s),
        latency_mean_ms=profile.latency_mean_ms or 0.0,
        latency_p50_ms=profile.latency_p50_ms or 0.0,
        latency_p90_ms=profile.latency_p90_ms or 0.0,
        latency_p99_ms=profile.latency_p99_ms or 0.0,
        prompt_tokens=profile.prompt_tokens,
        completion_tokens=profile.completion_tokens,
        tokens_per_second=profile.tokens_per_second,
        requests=profile.requests,
        retries=profile.retries,
        rate_limited=profile.rate_limited,
        effective_concurrency=profile.effective_concurrency,
        scoring_time=duration(profile.scoring_time_s),
        samples_truncated=profile.samples_truncated,
        samples_empty=profile.samples_empty,
        samples_without_usage=profile.samples_without_usage,
        cache_hits=profile.cache_hits,
    )
    if profile.decode_tokens_per_second is not None:
        message.decode_tokens_per_second = profile.decode_tokens_per_second
    if profile.cost is not None:
        message.cost.CopyFrom(cost_to_proto(profile.cost))
    if profile.ttft_p50_ms is not None:
        message.ttft_p50_ms = profile.ttft_p50_ms
    if profile.ttft_p99_ms is not None:
        message.ttft_p99_ms = profile.ttft_p99_ms
    return message


def evaluation_to_proto(evaluation: TaskEvaluation) -> result_pb2.TaskEvaluationResult:
    benchmark = evaluation.benchmark
    provenance = evaluation.provenance
    result = result_pb2.TaskEvaluationResult(
        task_id=evaluation.task_id,
        run_id=evaluation.run_id,
        task_type=to_proto_enum(evaluation.task_type),
        model=model_pb2.ModelIdentity(
            model_id=evaluation.model.model_id,
            provider=evaluation.model.provider,
            provider_model=evaluation.model.provider_model,
            params=params_to_proto(evaluation.model.params),
        ),
        benchmark=result_pb2.BenchmarkRef(
            name=benchmark.name,
            benchmark_version=benchmark.benchmark_version,
            content_sha256=benchmark.content_sha256,
            record_count=benchmark.record_count,
            dataset_id=benchmark.dataset_id,
        ),
        execution_profile=_profile(evaluation.profile),
        status=to_proto_enum(evaluation.status),
        errors=[eval_error_to_proto(error) for error in evaluation.errors],
        provenance=result_pb2.Provenance(
            contract_version=provenance.contract_version,
            evald_version=provenance.evald_version,
            scorer=provenance.scorer,
            prompt_template_sha256=provenance.prompt_template_sha256,
            dataset_sha256=provenance.dataset_sha256,
            python_version=provenance.python_version,
            platform=provenance.platform,
            bootstrap_seed=provenance.bootstrap_seed,
            dependencies=provenance.dependencies,
            rescored_from_run_id=provenance.rescored_from or "",
        ),
        created_time=timestamp(evaluation.created_at),
    )
    if provenance.prompt_format is not None:
        result.provenance.prompt_format = to_proto_enum(provenance.prompt_format)
    if provenance.judge is not None:
        result.provenance.judge.CopyFrom(judge_provenance_to_proto(provenance.judge))
    if evaluation.judge_profile is not None:
        result.judge_execution_profile.CopyFrom(_profile(evaluation.judge_profile))
    if evaluation.report is not None:
        apply_score_report(evaluation.report, result)
    result.reduced_metrics.extend(reduced_metric_to_proto(m) for m in evaluation.reduced)
    # Execution figures are headline metrics too (p99_latency_ms …), after the scorer's.
    result.metrics_summary.update(evaluation.metrics_summary)
    return result
