"""``TaskEvaluationResult`` → ``TaskResult``: identity, metrics and their intervals,
the execution profile, provenance and the typed payload of each task type.
"""

from typing import Any

from evald.v1 import enums_pb2, payloads_pb2, result_pb2
from evald_client._convert_common import (
    cost_from_proto,
    enum_from_proto,
    eval_error_from_proto,
    judge_score_format_from_proto,
    optional,
    result_status_from_proto,
    same_names,
    seconds,
    task_type_from_proto,
    timestamp,
)
from evald_client._convert_runs import generation_from_proto
from evald_client._enums import IntervalMethod, PromptFormat
from evald_client._results import (
    BenchmarkRef,
    ChoiceLetterStats,
    ClassificationPayload,
    ClassMetrics,
    CodePayload,
    CodeVerdictCount,
    ConfusionMatrix,
    EntityTypeMetrics,
    ExecutionProfile,
    ExtractionRuleCount,
    GenerationPayload,
    JudgeProvenance,
    MatchModeStats,
    MetricInterval,
    MetricUncertainty,
    ModelIdentity,
    MultipleChoicePayload,
    NerPayload,
    PassAtK,
    Payload,
    Provenance,
    QaPayload,
    ReducedMetric,
    RepeatStats,
    RougeScore,
    StructuredOutputPayload,
    SubjectAccuracy,
    SummarizationPayload,
    TaskResult,
    ToolCallPayload,
    WorstExample,
)


def interval_from_proto(interval: result_pb2.MetricInterval) -> MetricInterval:
    return MetricInterval(
        lower=interval.lower,
        upper=interval.upper,
        confidence_level=interval.confidence_level,
        method=enum_from_proto(
            IntervalMethod, result_pb2.IntervalMethod, interval.method, "INTERVAL_METHOD_"
        ),
        resamples=interval.resamples,
        seed=interval.seed,
    )


def _interval(message: result_pb2.MetricUncertainty, field: str) -> MetricInterval | None:
    return interval_from_proto(getattr(message, field)) if message.HasField(field) else None


def _execution(message: result_pb2.ExecutionProfile) -> ExecutionProfile:
    # Every answer without usage: the token figures are unknown, not zero.
    usage_unknown = 0 < message.samples_succeeded <= message.samples_without_usage
    return ExecutionProfile(
        samples_total=message.samples_total,
        samples_succeeded=message.samples_succeeded,
        samples_failed=message.samples_failed,
        samples_cancelled=message.samples_cancelled,
        wall_time_s=seconds(message.wall_time),
        latency_mean_ms=message.latency_mean_ms,
        latency_p50_ms=message.latency_p50_ms,
        latency_p90_ms=message.latency_p90_ms,
        latency_p99_ms=message.latency_p99_ms,
        ttft_p50_ms=optional(message, "ttft_p50_ms"),
        ttft_p99_ms=optional(message, "ttft_p99_ms"),
        prompt_tokens=None if usage_unknown else message.prompt_tokens,
        completion_tokens=None if usage_unknown else message.completion_tokens,
        tokens_per_second=None if usage_unknown else message.tokens_per_second,
        requests=message.requests,
        retries=message.retries,
        rate_limited=message.rate_limited,
        effective_concurrency=message.effective_concurrency,
        scoring_time_s=seconds(message.scoring_time),
        samples_truncated=message.samples_truncated,
        samples_empty=message.samples_empty,
        samples_without_usage=message.samples_without_usage,
        decode_tokens_per_second=optional(message, "decode_tokens_per_second"),
        cost=cost_from_proto(message.cost) if message.HasField("cost") else None,
        cache_hits=message.cache_hits,
    )


def _provenance(message: result_pb2.Provenance) -> Provenance:
    return Provenance(
        contract_version=message.contract_version,
        evald_version=message.evald_version,
        scorer=message.scorer,
        prompt_template_sha256=message.prompt_template_sha256,
        dataset_sha256=message.dataset_sha256,
        python_version=message.python_version,
        platform=message.platform,
        bootstrap_seed=message.bootstrap_seed,
        dependencies=dict(message.dependencies),
        judge=judge_provenance_from_proto(message.judge) if message.HasField("judge") else None,
        prompt_format=enum_from_proto(
            PromptFormat, enums_pb2.PromptFormat, message.prompt_format, "PROMPT_FORMAT_"
        ),
        rescored_from_run_id=message.rescored_from_run_id,
    )


def judge_provenance_from_proto(message: result_pb2.JudgeProvenance) -> JudgeProvenance:
    return JudgeProvenance(
        model_id=message.model.model_id,
        provider=message.model.provider,
        provider_model=message.model.provider_model,
        params=generation_from_proto(message.model.params),
        rubric_sha256=message.rubric_sha256,
        score_format=judge_score_format_from_proto(message.score_format),
        scale_min=message.scale_min,
        scale_max=message.scale_max,
        pass_threshold=message.pass_threshold,
        rounds=message.rounds,
        parse_retries=message.parse_retries,
        judged_samples=message.judged_samples,
        unjudged_samples=message.unjudged_samples,
    )


def _worst(examples: Any) -> tuple[WorstExample, ...]:
    return tuple(same_names(WorstExample, e) for e in examples)


def _classification(message: payloads_pb2.ClassificationPayload) -> ClassificationPayload:
    matrix = message.confusion_matrix
    return ClassificationPayload(
        labels=tuple(message.labels),
        confusion_matrix=ConfusionMatrix(
            labels=tuple(matrix.labels),
            rows=tuple(tuple(row.counts) for row in matrix.rows),
            unmapped=tuple(row.unmapped for row in matrix.rows),
        ),
        per_class=tuple(same_names(ClassMetrics, m) for m in message.per_class),
        unmapped_outputs=message.unmapped_outputs,
        worst_examples=_worst(message.worst_examples),
    )


def _payload(message: result_pb2.TaskEvaluationResult) -> Payload | None:
    kind = message.WhichOneof("payload")
    if kind == "classification":
        return _classification(message.classification)
    if kind == "qa":
        qa = message.qa
        return QaPayload(
            exact_match=qa.exact_match,
            f1=qa.f1,
            answered=qa.answered,
            no_answer_outputs=qa.no_answer_outputs,
            worst_examples=_worst(qa.worst_examples),
        )
    if kind == "ner":
        ner = message.ner
        return NerPayload(
            per_type=tuple(same_names(EntityTypeMetrics, m) for m in ner.per_type),
            unparseable_outputs=ner.unparseable_outputs,
            worst_examples=_worst(ner.worst_examples),
        )
    if kind == "summarization":
        summarization = message.summarization
        return SummarizationPayload(
            rouge=tuple(same_names(RougeScore, r) for r in summarization.rouge),
            stemming=summarization.stemming,
            worst_examples=_worst(summarization.worst_examples),
        )
    if kind == "generation":
        generation = message.generation
        return GenerationPayload(
            match_modes=tuple(same_names(MatchModeStats, m) for m in generation.match_modes),
            worst_examples=_worst(generation.worst_examples),
        )
    if kind == "multiple_choice":
        choice = message.multiple_choice
        return MultipleChoicePayload(
            accuracy=choice.accuracy,
            unmapped_outputs=choice.unmapped_outputs,
            letters=tuple(same_names(ChoiceLetterStats, m) for m in choice.letters),
            subjects=tuple(same_names(SubjectAccuracy, m) for m in choice.subjects),
            subject_macro_accuracy=choice.subject_macro_accuracy,
            extraction_rules=tuple(
                same_names(ExtractionRuleCount, m) for m in choice.extraction_rules
            ),
            logprob_scored=choice.logprob_scored,
            logprob_fallbacks=choice.logprob_fallbacks,
            worst_examples=_worst(choice.worst_examples),
        )
    if kind == "code":
        code = message.code
        return CodePayload(
            pass_at_1=code.pass_at_1,
            pass_at_k=tuple(same_names(PassAtK, m) for m in code.pass_at_k),
            verdicts=tuple(same_names(CodeVerdictCount, m) for m in code.verdicts),
            problems=code.problems,
            extraction_rules=tuple(
                same_names(ExtractionRuleCount, m) for m in code.extraction_rules
            ),
            worst_examples=_worst(code.worst_examples),
        )
    if kind == "tool_call":
        tool = message.tool_call
        return ToolCallPayload(
            **{
                name: getattr(tool, name)
                for name in ToolCallPayload.__dataclass_fields__
                if name != "worst_examples"
            },
            worst_examples=_worst(tool.worst_examples),
        )
    if kind == "structured_output":
        structured = message.structured_output
        return StructuredOutputPayload(
            **{
                name: getattr(structured, name)
                for name in StructuredOutputPayload.__dataclass_fields__
                if name != "worst_examples"
            },
            worst_examples=_worst(structured.worst_examples),
        )
    return None


def result_from_proto(message: result_pb2.TaskEvaluationResult) -> TaskResult:
    model = message.model
    benchmark = message.benchmark
    return TaskResult(
        task_id=message.task_id,
        run_id=message.run_id,
        task_type=task_type_from_proto(message.task_type),
        model=ModelIdentity(
            model_id=model.model_id,
            provider=model.provider,
            provider_model=model.provider_model,
            params=generation_from_proto(model.params),
        ),
        benchmark=BenchmarkRef(
            name=benchmark.name,
            version=benchmark.benchmark_version,
            content_sha256=benchmark.content_sha256,
            record_count=benchmark.record_count,
            dataset_id=benchmark.dataset_id,
        ),
        metrics=dict(message.metrics_summary),
        intervals={
            key: MetricUncertainty(
                bootstrap=_interval(value, "bootstrap"), analytic=_interval(value, "analytic")
            )
            for key, value in message.metric_uncertainty.items()
        },
        execution=_execution(message.execution_profile),
        repeat_stats=(
            same_names(RepeatStats, message.repeat_stats)
            if message.HasField("repeat_stats")
            else None
        ),
        status=result_status_from_proto(message.status),
        errors=tuple(eval_error_from_proto(e) for e in message.errors),
        provenance=_provenance(message.provenance),
        created_time=timestamp(message, "created_time"),
        payload=_payload(message),
        judge_execution=_execution(message.judge_execution_profile)
        if message.HasField("judge_execution_profile")
        else None,
        reduced=tuple(
            ReducedMetric(
                name=r.name,
                value=r.value,
                interval=interval_from_proto(r.interval),
                records=r.records,
                records_skipped=r.records_skipped,
            )
            for r in message.reduced_metrics
        ),
    )
