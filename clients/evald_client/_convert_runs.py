"""Datasets, models, runs (spec, progress) and samples as the server sends them."""

from evald.v1 import dataset_pb2, enums_pb2, model_pb2, run_pb2, sample_pb2
from evald_client._convert_common import (
    CLASS_BUDGETS,
    cost_from_proto,
    enum_from_proto,
    eval_error_from_proto,
    judge_score_format_from_proto,
    optional,
    result_status_from_proto,
    retry_counts_from_proto,
    run_state_from_proto,
    same_names,
    seconds,
    task_type_from_proto,
    timestamp,
)
from evald_client._enums import (
    ChoiceContinuation,
    ChoiceScoring,
    FinishReason,
    PromptFormat,
    ReducerKind,
    ShotFormat,
    SubtaskState,
    TaskState,
)
from evald_client._models import (
    Budget,
    CodeExecution,
    CodeTestOutcome,
    Dataset,
    DatasetOptions,
    DatasetRef,
    GenerationParams,
    JudgeOptions,
    Model,
    PromptOptions,
    Reducer,
    RetryPolicy,
    Run,
    RunProgress,
    RunSpec,
    Sample,
    SampleJudgement,
    SubtaskCounts,
    TaskProgress,
)


def dataset_ref_from_proto(message: dataset_pb2.DatasetRef) -> DatasetRef:
    return DatasetRef(message.name, message.benchmark_version)


def prompt_from_proto(message: dataset_pb2.PromptOptions) -> PromptOptions:
    return PromptOptions(
        system_message=optional(message, "system_message"),
        shots=message.shots,
        shots_from=dataset_ref_from_proto(message.shots_from)
        if message.HasField("shots_from")
        else None,
        shot_seed=message.shot_seed,
        shot_format=enum_from_proto(
            ShotFormat, enums_pb2.ShotFormat, message.shot_format, "SHOT_FORMAT_"
        ),
    )


def _choice_scoring(value: int) -> ChoiceScoring | None:
    if value == enums_pb2.CHOICE_SCORING_UNSPECIFIED:
        return None
    return enum_from_proto(ChoiceScoring, enums_pb2.ChoiceScoring, value, "CHOICE_SCORING_")


def prompt_format_from_proto(value: int) -> PromptFormat | None:
    if value == enums_pb2.PROMPT_FORMAT_UNSPECIFIED:
        return None
    return enum_from_proto(PromptFormat, enums_pb2.PromptFormat, value, "PROMPT_FORMAT_")


def _continuation(value: int) -> ChoiceContinuation | None:
    if value == enums_pb2.CHOICE_CONTINUATION_UNSPECIFIED:
        return None
    return enum_from_proto(
        ChoiceContinuation, enums_pb2.ChoiceContinuation, value, "CHOICE_CONTINUATION_"
    )


def dataset_options_from_proto(message: run_pb2.DatasetRunOptions) -> DatasetOptions:
    return DatasetOptions(
        dataset=dataset_ref_from_proto(message.dataset),
        generation=generation_from_proto(message.generation_overrides)
        if message.HasField("generation_overrides")
        else None,
        prompt=prompt_from_proto(message.prompt) if message.HasField("prompt") else None,
        choice_scoring=_choice_scoring(message.choice_scoring),
        choice_continuation=_continuation(message.choice_continuation),
        prompt_format=prompt_format_from_proto(message.prompt_format),
    )


def dataset_from_proto(message: dataset_pb2.Dataset) -> Dataset:
    return Dataset(
        dataset_id=message.dataset_id,
        name=message.name,
        version=message.benchmark_version,
        task_type=task_type_from_proto(message.task_type),
        record_count=message.record_count,
        content_sha256=message.content_sha256,
        prompt_template=message.prompt_template,
        created_time=timestamp(message, "created_time"),
        size_bytes=message.size_bytes,
        prompt=prompt_from_proto(message.prompt) if message.HasField("prompt") else None,
    )


def generation_from_proto(message: model_pb2.GenerationParams) -> GenerationParams:
    return GenerationParams(
        temperature=optional(message, "temperature"),
        max_tokens=optional(message, "max_tokens"),
        top_p=optional(message, "top_p"),
        seed=optional(message, "seed"),
        stop=tuple(message.stop),
    )


def model_from_proto(message: model_pb2.Model) -> Model:
    return Model(
        model_id=message.model_id,
        provider=message.provider,
        provider_model=message.provider_model,
        max_concurrency=message.max_concurrency,
        timeout_s=seconds(message.timeout) if message.HasField("timeout") else None,
        default_params=generation_from_proto(message.default_params),
        streaming=message.streaming,
    )


def counts_from_proto(message: run_pb2.SubtaskCounts) -> SubtaskCounts:
    return same_names(SubtaskCounts, message)


def task_progress_from_proto(message: run_pb2.TaskProgress) -> TaskProgress:
    return TaskProgress(
        task_id=message.task_id,
        model_id=message.model_id,
        dataset=dataset_ref_from_proto(message.dataset),
        task_type=task_type_from_proto(message.task_type),
        state=enum_from_proto(TaskState, enums_pb2.TaskState, message.state, "TASK_STATE_"),
        counts=counts_from_proto(message.counts),
        result_status=result_status_from_proto(message.result_status),
    )


def progress_from_proto(message: run_pb2.RunProgress) -> RunProgress:
    return RunProgress(
        counts=counts_from_proto(message.counts),
        tasks=tuple(task_progress_from_proto(task) for task in message.tasks),
        cost=cost_from_proto(message.cost) if message.HasField("cost") else None,
    )


def retry_policy_from_proto(message: run_pb2.RetryPolicy) -> RetryPolicy:
    return RetryPolicy(
        max_retries=optional(message, "max_retries"),
        backoff_s=tuple(seconds(d) for d in message.backoff),
        jitter_fraction=optional(message, "jitter_fraction"),
        retry_after_cap_s=(
            seconds(message.retry_after_cap) if message.HasField("retry_after_cap") else None
        ),
        **{name: optional(message, name) for name in CLASS_BUDGETS},
    )


def run_spec_from_proto(message: run_pb2.RunSpec) -> RunSpec:
    return RunSpec(
        name=message.name,
        model_ids=tuple(message.model_ids),
        datasets=tuple(dataset_ref_from_proto(ref) for ref in message.datasets),
        max_concurrency=optional(message, "max_concurrency"),
        repeat=message.repeat or 1,
        retry_policy=retry_policy_from_proto(message.retry_policy),
        generation=generation_from_proto(message.generation_overrides),
        labels=dict(message.labels),
        dataset_options=tuple(dataset_options_from_proto(o) for o in message.dataset_options),
        prompt=prompt_from_proto(message.prompt) if message.HasField("prompt") else None,
        choice_scoring=_choice_scoring(message.choice_scoring),
        budget=Budget(
            max_cost_usd=optional(message.budget, "max_cost_usd"),
            max_tokens=optional(message.budget, "max_tokens"),
        )
        if message.HasField("budget")
        else None,
        judge=judge_options_from_proto(message.judge) if message.HasField("judge") else None,
        response_cache=message.response_cache,
        reducers=tuple(
            Reducer(
                enum_from_proto(ReducerKind, enums_pb2.ReducerKind, r.kind, "REDUCER_KIND_"),
                r.k or None,
            )
            for r in message.reducers
        ),
        prompt_format=prompt_format_from_proto(message.prompt_format),
    )


def judge_options_from_proto(message: run_pb2.JudgeSpec) -> JudgeOptions:
    return JudgeOptions(
        model_id=message.model_id,
        rubric=message.rubric,
        score_format=judge_score_format_from_proto(message.score_format),
        scale_min=message.scale_min,
        scale_max=message.scale_max,
        pass_threshold=optional(message, "pass_threshold"),
        rounds=message.rounds or 1,
        parse_retries=optional(message, "parse_retries"),
        generation=generation_from_proto(message.generation_overrides)
        if message.HasField("generation_overrides")
        else None,
    )


def judgement_from_proto(message: sample_pb2.SampleJudgement) -> SampleJudgement:
    return SampleJudgement(
        score=optional(message, "score"),
        passed=optional(message, "passed"),
        rationale=message.rationale,
        rounds=message.rounds,
        agreed=optional(message, "agreed"),
        error=eval_error_from_proto(message.error) if message.HasField("error") else None,
    )


def run_from_proto(message: run_pb2.Run) -> Run:
    return Run(
        run_id=message.run_id,
        spec=run_spec_from_proto(message.spec),
        state=run_state_from_proto(message.state),
        progress=progress_from_proto(message.progress),
        created_time=timestamp(message, "created_time"),
        started_time=timestamp(message, "started_time"),
        finished_time=timestamp(message, "finished_time"),
        last_seq=message.last_seq,
        request_id=message.request_id,
        cancel_requested=message.cancel_requested,
        cancel_reason=message.cancel_reason,
        rescored_from_run_id=message.rescored_from_run_id,
    )


def _usage_known(message: sample_pb2.Sample) -> bool:
    # Servers before contract 1.1 never set usage_reported: their non-zero counts are real.
    return message.usage_reported or bool(message.prompt_tokens or message.completion_tokens)


def sample_from_proto(message: sample_pb2.Sample) -> Sample:
    return Sample(
        subtask_id=message.subtask_id,
        task_id=message.task_id,
        model_id=message.model_id,
        record_id=message.record_id,
        repeat_index=message.repeat_index,
        state=enum_from_proto(
            SubtaskState, enums_pb2.SubtaskState, message.state, "SUBTASK_STATE_"
        ),
        input=message.input,
        expected=message.expected,
        output=message.output,
        scores=dict(message.scores),
        flags=tuple(message.flags),
        attempts=message.attempts,
        latency_ms=optional(message, "latency_ms"),
        ttft_ms=optional(message, "ttft_ms"),
        prompt_tokens=message.prompt_tokens if _usage_known(message) else None,
        completion_tokens=message.completion_tokens if _usage_known(message) else None,
        first_error=(
            eval_error_from_proto(message.first_error) if message.HasField("first_error") else None
        ),
        last_error=(
            eval_error_from_proto(message.last_error) if message.HasField("last_error") else None
        ),
        finished_time=timestamp(message, "finished_time"),
        finish_reason=enum_from_proto(
            FinishReason, sample_pb2.FinishReason, message.finish_reason, "FINISH_REASON_"
        ),
        decode_tokens_per_second=optional(message, "decode_tokens_per_second"),
        truncated_fields={t.field: t.full_bytes for t in message.truncated_fields},
        cost=cost_from_proto(message.cost) if message.HasField("cost") else None,
        failed_attempts=retry_counts_from_proto(message.failed_attempts),
        judgement=judgement_from_proto(message.judgement)
        if message.HasField("judgement")
        else None,
        cache_hit=message.cache_hit,
        execution=execution_from_proto(message.execution)
        if message.HasField("execution")
        else None,
    )


def execution_from_proto(message: sample_pb2.CodeExecution) -> CodeExecution:
    return CodeExecution(
        verdict=message.verdict,
        reason=message.reason,
        error_type=message.error_type,
        traceback=message.traceback,
        resource=message.resource,
        tests=tuple(
            CodeTestOutcome(
                index=t.index, status=t.status, error_type=t.error_type, detail=t.detail
            )
            for t in message.tests
        ),
        extraction_rule=message.extraction_rule,
        duration_ms=message.duration_ms,
        stdout=message.stdout,
        stderr=message.stderr,
        output_truncated=message.output_truncated,
    )
