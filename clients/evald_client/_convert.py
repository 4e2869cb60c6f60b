"""The one place where evald.v1 protobuf messages and the SDK's typed objects meet.

``*_from_proto`` read server messages into frozen dataclasses; the few ``*_to_proto``
build request parts from caller-supplied objects. Nothing else in the SDK reads a
protobuf field.
"""

from dataclasses import fields
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar, cast

from google.protobuf import duration_pb2, timestamp_pb2

from evald.v1 import (
    dataset_pb2,
    enums_pb2,
    errors_pb2,
    event_pb2,
    model_pb2,
    payloads_pb2,
    result_pb2,
    run_pb2,
    sample_pb2,
)
from evald_client._enums import (
    ChoiceScoring,
    ErrorCategory,
    FinishReason,
    IntervalMethod,
    JudgeScoreFormat,
    ResultStatus,
    RunState,
    ShotFormat,
    SubtaskState,
    TaskState,
    TaskType,
)
from evald_client._events import (
    Heartbeat,
    ModelActivity,
    Progress,
    RunEvent,
    SampleFailed,
    StateChanged,
    TaskScored,
)
from evald_client._models import (
    Dataset,
    DatasetOptions,
    DatasetRef,
    EvalError,
    GenerationParams,
    JudgeOptions,
    Model,
    PromptOptions,
    RetryPolicy,
    Run,
    RunProgress,
    RunSpec,
    Sample,
    SampleJudgement,
    SubtaskCounts,
    TaskProgress,
)
from evald_client._results import (
    BenchmarkRef,
    ChoiceLetterStats,
    ClassificationPayload,
    ClassMetrics,
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
    Payload,
    Provenance,
    QaPayload,
    RepeatStats,
    RougeScore,
    SubjectAccuracy,
    SummarizationPayload,
    TaskResult,
    WorstExample,
)

_E = TypeVar("_E", bound=StrEnum)
_T = TypeVar("_T")


def _same_names(cls: type[_T], message: Any) -> _T:
    """``cls`` filled from the scalar proto fields of the same names (flat messages only;
    tests/client/test_convert.py converts a fully populated message of each)."""
    return cls(**{f.name: getattr(message, f.name) for f in fields(cls)})  # type: ignore[arg-type]


def _enum(cls: type[_E], wrapper: Any, value: int, prefix: str) -> _E:
    """The SDK member named like proto ``value`` without ``prefix``; unknown → UNSPECIFIED."""
    try:
        name = str(wrapper.Name(value)).removeprefix(prefix)
    except ValueError:  # a value newer than this client
        name = "UNSPECIFIED"
    return cls.__members__.get(name, cls.__members__["UNSPECIFIED"])


def _enum_to_proto(member: StrEnum, wrapper: Any, prefix: str) -> Any:
    return wrapper.Value(prefix + member.name)


def task_type_to_proto(task_type: TaskType) -> enums_pb2.TaskType:
    return cast(enums_pb2.TaskType, _enum_to_proto(task_type, enums_pb2.TaskType, "TASK_TYPE_"))


def run_state_to_proto(state: RunState) -> enums_pb2.RunState:
    return cast(enums_pb2.RunState, _enum_to_proto(state, enums_pb2.RunState, "RUN_STATE_"))


def subtask_state_to_proto(state: SubtaskState) -> enums_pb2.SubtaskState:
    value = _enum_to_proto(state, enums_pb2.SubtaskState, "SUBTASK_STATE_")
    return cast(enums_pb2.SubtaskState, value)


def category_to_proto(category: ErrorCategory) -> errors_pb2.ErrorCategory:
    value = _enum_to_proto(category, errors_pb2.ErrorCategory, "ERROR_CATEGORY_")
    return cast(errors_pb2.ErrorCategory, value)


def reason_to_proto(reason: str) -> errors_pb2.ErrorReason:
    """An ErrorReason by the name errors carry (``PROVIDER_RATE_LIMITED``; any case).

    Raises ``ValueError`` for a name this client's contract does not know."""
    name = reason.strip().upper().removeprefix("ERROR_REASON_")
    try:
        return cast(errors_pb2.ErrorReason, errors_pb2.ErrorReason.Value("ERROR_REASON_" + name))
    except ValueError:
        raise ValueError(f"unknown error reason {reason!r}") from None


def task_type_from_proto(value: int) -> TaskType:
    return _enum(TaskType, enums_pb2.TaskType, value, "TASK_TYPE_")


def _time(message: Any, field: str) -> datetime | None:
    if not message.HasField(field):
        return None
    stamp: timestamp_pb2.Timestamp = getattr(message, field)
    return stamp.ToDatetime(tzinfo=UTC)


def _seconds(duration: duration_pb2.Duration) -> float:
    return duration.seconds + duration.nanos / 1e9


def _duration(seconds: float) -> duration_pb2.Duration:
    duration = duration_pb2.Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration


def _optional(message: Any, field: str) -> Any:
    return getattr(message, field) if message.HasField(field) else None


# -- requests ----------------------------------------------------------------------------


def generation_to_proto(params: GenerationParams) -> model_pb2.GenerationParams:
    message = model_pb2.GenerationParams(stop=list(params.stop))
    if params.temperature is not None:
        message.temperature = params.temperature
    if params.max_tokens is not None:
        message.max_tokens = params.max_tokens
    if params.top_p is not None:
        message.top_p = params.top_p
    if params.seed is not None:
        message.seed = params.seed
    return message


def retry_policy_to_proto(policy: RetryPolicy) -> run_pb2.RetryPolicy:
    message = run_pb2.RetryPolicy(backoff=[_duration(s) for s in policy.backoff_s])
    if policy.max_retries is not None:
        message.max_retries = policy.max_retries
    if policy.jitter_fraction is not None:
        message.jitter_fraction = policy.jitter_fraction
    if policy.retry_after_cap_s is not None:
        message.retry_after_cap.CopyFrom(_duration(policy.retry_after_cap_s))
    return message


def dataset_ref_to_proto(ref: DatasetRef) -> dataset_pb2.DatasetRef:
    return dataset_pb2.DatasetRef(name=ref.name, benchmark_version=ref.version)


def prompt_to_proto(options: PromptOptions) -> dataset_pb2.PromptOptions:
    message = dataset_pb2.PromptOptions(
        shots=options.shots,
        shot_seed=options.shot_seed,
        shot_format=cast(
            enums_pb2.ShotFormat,
            _enum_to_proto(options.shot_format, enums_pb2.ShotFormat, "SHOT_FORMAT_"),
        ),
    )
    if options.system_message is not None:
        message.system_message = options.system_message
    if options.shots_from is not None:
        message.shots_from.CopyFrom(dataset_ref_to_proto(options.shots_from))
    return message


def choice_scoring_to_proto(scoring: ChoiceScoring) -> enums_pb2.ChoiceScoring:
    value = _enum_to_proto(scoring, enums_pb2.ChoiceScoring, "CHOICE_SCORING_")
    return cast(enums_pb2.ChoiceScoring, value)


def dataset_options_to_proto(options: DatasetOptions) -> run_pb2.DatasetRunOptions:
    message = run_pb2.DatasetRunOptions(dataset=dataset_ref_to_proto(options.dataset))
    if options.generation is not None:
        message.generation_overrides.CopyFrom(generation_to_proto(options.generation))
    if options.prompt is not None:
        message.prompt.CopyFrom(prompt_to_proto(options.prompt))
    if options.choice_scoring is not None:
        message.choice_scoring = choice_scoring_to_proto(options.choice_scoring)
    return message


# -- datasets, models ------------------------------------------------------------------------


def dataset_ref_from_proto(message: dataset_pb2.DatasetRef) -> DatasetRef:
    return DatasetRef(message.name, message.benchmark_version)


def prompt_from_proto(message: dataset_pb2.PromptOptions) -> PromptOptions:
    return PromptOptions(
        system_message=_optional(message, "system_message"),
        shots=message.shots,
        shots_from=dataset_ref_from_proto(message.shots_from)
        if message.HasField("shots_from")
        else None,
        shot_seed=message.shot_seed,
        shot_format=_enum(ShotFormat, enums_pb2.ShotFormat, message.shot_format, "SHOT_FORMAT_"),
    )


def _choice_scoring(value: int) -> ChoiceScoring | None:
    if value == enums_pb2.CHOICE_SCORING_UNSPECIFIED:
        return None
    return _enum(ChoiceScoring, enums_pb2.ChoiceScoring, value, "CHOICE_SCORING_")


def dataset_options_from_proto(message: run_pb2.DatasetRunOptions) -> DatasetOptions:
    return DatasetOptions(
        dataset=dataset_ref_from_proto(message.dataset),
        generation=generation_from_proto(message.generation_overrides)
        if message.HasField("generation_overrides")
        else None,
        prompt=prompt_from_proto(message.prompt) if message.HasField("prompt") else None,
        choice_scoring=_choice_scoring(message.choice_scoring),
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
        created_time=_time(message, "created_time"),
        size_bytes=message.size_bytes,
        prompt=prompt_from_proto(message.prompt) if message.HasField("prompt") else None,
    )


def generation_from_proto(message: model_pb2.GenerationParams) -> GenerationParams:
    return GenerationParams(
        temperature=_optional(message, "temperature"),
        max_tokens=_optional(message, "max_tokens"),
        top_p=_optional(message, "top_p"),
        seed=_optional(message, "seed"),
        stop=tuple(message.stop),
    )


def model_from_proto(message: model_pb2.Model) -> Model:
    return Model(
        model_id=message.model_id,
        provider=message.provider,
        provider_model=message.provider_model,
        max_concurrency=message.max_concurrency,
        timeout_s=_seconds(message.timeout) if message.HasField("timeout") else None,
        default_params=generation_from_proto(message.default_params),
        streaming=message.streaming,
    )


def eval_error_from_proto(message: errors_pb2.EvalError) -> EvalError:
    try:
        reason = errors_pb2.ErrorReason.Name(message.reason).removeprefix("ERROR_REASON_")
    except ValueError:  # a reason newer than this client; the category still says who acts
        reason = f"UNKNOWN_{message.reason}"
    return EvalError(
        category=_enum(
            ErrorCategory, errors_pb2.ErrorCategory, message.category, "ERROR_CATEGORY_"
        ),
        reason=reason,
        message=message.message,
        retryable=message.retryable,
        http_equivalent=message.http_equivalent,
        metadata=dict(message.metadata),
    )


# -- runs -------------------------------------------------------------------------------------


def counts_from_proto(message: run_pb2.SubtaskCounts) -> SubtaskCounts:
    return _same_names(SubtaskCounts, message)


def task_progress_from_proto(message: run_pb2.TaskProgress) -> TaskProgress:
    return TaskProgress(
        task_id=message.task_id,
        model_id=message.model_id,
        dataset=dataset_ref_from_proto(message.dataset),
        task_type=task_type_from_proto(message.task_type),
        state=_enum(TaskState, enums_pb2.TaskState, message.state, "TASK_STATE_"),
        counts=counts_from_proto(message.counts),
        result_status=_result_status(message.result_status),
    )


def progress_from_proto(message: run_pb2.RunProgress) -> RunProgress:
    return RunProgress(
        counts=counts_from_proto(message.counts),
        tasks=tuple(task_progress_from_proto(task) for task in message.tasks),
    )


def retry_policy_from_proto(message: run_pb2.RetryPolicy) -> RetryPolicy:
    return RetryPolicy(
        max_retries=_optional(message, "max_retries"),
        backoff_s=tuple(_seconds(d) for d in message.backoff),
        jitter_fraction=_optional(message, "jitter_fraction"),
        retry_after_cap_s=(
            _seconds(message.retry_after_cap) if message.HasField("retry_after_cap") else None
        ),
    )


def run_spec_from_proto(message: run_pb2.RunSpec) -> RunSpec:
    return RunSpec(
        name=message.name,
        model_ids=tuple(message.model_ids),
        datasets=tuple(dataset_ref_from_proto(ref) for ref in message.datasets),
        max_concurrency=_optional(message, "max_concurrency"),
        repeat=message.repeat or 1,
        retry_policy=retry_policy_from_proto(message.retry_policy),
        generation=generation_from_proto(message.generation_overrides),
        labels=dict(message.labels),
        dataset_options=tuple(dataset_options_from_proto(o) for o in message.dataset_options),
        prompt=prompt_from_proto(message.prompt) if message.HasField("prompt") else None,
        choice_scoring=_choice_scoring(message.choice_scoring),
        judge=judge_options_from_proto(message.judge) if message.HasField("judge") else None,
        response_cache=message.response_cache,
    )


# -- model-graded scoring ---------------------------------------------------------------


def judge_options_to_proto(options: JudgeOptions) -> run_pb2.JudgeSpec:
    message = run_pb2.JudgeSpec(
        model_id=options.model_id,
        rubric=options.rubric,
        score_format=_enum_to_proto(
            JudgeScoreFormat(options.score_format),
            enums_pb2.JudgeScoreFormat,
            "JUDGE_SCORE_FORMAT_",
        ),
        scale_min=options.scale_min,
        scale_max=options.scale_max,
        rounds=options.rounds,
    )
    if options.pass_threshold is not None:
        message.pass_threshold = options.pass_threshold
    if options.parse_retries is not None:
        message.parse_retries = options.parse_retries
    if options.generation is not None:
        message.generation_overrides.CopyFrom(generation_to_proto(options.generation))
    return message


def _score_format(value: int) -> JudgeScoreFormat:
    return _enum(JudgeScoreFormat, enums_pb2.JudgeScoreFormat, value, "JUDGE_SCORE_FORMAT_")


def judge_options_from_proto(message: run_pb2.JudgeSpec) -> JudgeOptions:
    return JudgeOptions(
        model_id=message.model_id,
        rubric=message.rubric,
        score_format=_score_format(message.score_format),
        scale_min=message.scale_min,
        scale_max=message.scale_max,
        pass_threshold=_optional(message, "pass_threshold"),
        rounds=message.rounds or 1,
        parse_retries=_optional(message, "parse_retries"),
        generation=generation_from_proto(message.generation_overrides)
        if message.HasField("generation_overrides")
        else None,
    )


def judgement_from_proto(message: sample_pb2.SampleJudgement) -> SampleJudgement:
    return SampleJudgement(
        score=_optional(message, "score"),
        passed=_optional(message, "passed"),
        rationale=message.rationale,
        rounds=message.rounds,
        agreed=_optional(message, "agreed"),
        error=eval_error_from_proto(message.error) if message.HasField("error") else None,
    )


def judge_provenance_from_proto(message: result_pb2.JudgeProvenance) -> JudgeProvenance:
    return JudgeProvenance(
        model_id=message.model.model_id,
        provider=message.model.provider,
        provider_model=message.model.provider_model,
        params=generation_from_proto(message.model.params),
        rubric_sha256=message.rubric_sha256,
        score_format=_score_format(message.score_format),
        scale_min=message.scale_min,
        scale_max=message.scale_max,
        pass_threshold=message.pass_threshold,
        rounds=message.rounds,
        parse_retries=message.parse_retries,
        judged_samples=message.judged_samples,
        unjudged_samples=message.unjudged_samples,
    )


def run_from_proto(message: run_pb2.Run) -> Run:
    return Run(
        run_id=message.run_id,
        spec=run_spec_from_proto(message.spec),
        state=run_state_from_proto(message.state),
        progress=progress_from_proto(message.progress),
        created_time=_time(message, "created_time"),
        started_time=_time(message, "started_time"),
        finished_time=_time(message, "finished_time"),
        last_seq=message.last_seq,
        request_id=message.request_id,
        cancel_requested=message.cancel_requested,
    )


def run_state_from_proto(value: int) -> RunState:
    return _enum(RunState, enums_pb2.RunState, value, "RUN_STATE_")


def _result_status(value: int) -> ResultStatus:
    return _enum(ResultStatus, enums_pb2.ResultStatus, value, "RESULT_STATUS_")


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
        state=_enum(SubtaskState, enums_pb2.SubtaskState, message.state, "SUBTASK_STATE_"),
        input=message.input,
        expected=message.expected,
        output=message.output,
        scores=dict(message.scores),
        flags=tuple(message.flags),
        attempts=message.attempts,
        latency_ms=_optional(message, "latency_ms"),
        ttft_ms=_optional(message, "ttft_ms"),
        prompt_tokens=message.prompt_tokens if _usage_known(message) else None,
        completion_tokens=message.completion_tokens if _usage_known(message) else None,
        first_error=(
            eval_error_from_proto(message.first_error) if message.HasField("first_error") else None
        ),
        last_error=(
            eval_error_from_proto(message.last_error) if message.HasField("last_error") else None
        ),
        finished_time=_time(message, "finished_time"),
        finish_reason=_enum(
            FinishReason, sample_pb2.FinishReason, message.finish_reason, "FINISH_REASON_"
        ),
        decode_tokens_per_second=_optional(message, "decode_tokens_per_second"),
        truncated_fields={t.field: t.full_bytes for t in message.truncated_fields},
        judgement=judgement_from_proto(message.judgement)
        if message.HasField("judgement")
        else None,
        cache_hit=message.cache_hit,
    )


# -- events -----------------------------------------------------------------------------------


def event_from_proto(message: event_pb2.RunEvent) -> RunEvent | None:
    """The typed event, or ``None`` for a kind newer than this client (skipped)."""
    base: dict[str, Any] = {
        "seq": message.seq,
        "run_id": message.run_id,
        "event_time": _time(message, "event_time"),
    }
    kind = message.WhichOneof("kind")
    if kind == "state_changed":
        changed = message.state_changed
        return StateChanged(
            **base,
            state=run_state_from_proto(changed.state),
            previous=run_state_from_proto(changed.previous),
            cancel_requested=changed.cancel_requested,
        )
    if kind == "progress":
        snapshot = message.progress
        return Progress(
            **base,
            progress=progress_from_proto(snapshot.progress),
            throughput_per_s=snapshot.throughput_per_s,
            eta_s=_seconds(snapshot.eta) if snapshot.HasField("eta") else None,
            completed_since_last=snapshot.completed_since_last,
            # Servers before contract 1.1 do not say; they sent a rate only when they had one.
            throughput_known=snapshot.throughput_known or snapshot.throughput_per_s > 0,
            models=tuple(_model_activity(m) for m in snapshot.models),
        )
    if kind == "task_scored":
        return TaskScored(**base, result=result_from_proto(message.task_scored.result))
    if kind == "sample_failed":
        failed = message.sample_failed
        return SampleFailed(
            **base,
            task_id=failed.task_id,
            subtask_id=failed.subtask_id,
            record_id=failed.record_id,
            repeat_index=failed.repeat_index,
            model_id=failed.model_id,
            attempts=failed.attempts,
            error=eval_error_from_proto(failed.error),
        )
    if kind == "heartbeat":
        return Heartbeat(**{**base, "seq": message.heartbeat.current_seq or message.seq})
    return None


def _model_activity(message: event_pb2.ModelActivity) -> ModelActivity:
    return ModelActivity(
        model_id=message.model_id,
        queued=message.queued,
        in_flight=message.in_flight,
        waiting_on=tuple(message.waiting_on),
        stalled_since=_time(message, "stalled_since"),
        last_error=(
            eval_error_from_proto(message.last_error) if message.HasField("last_error") else None
        ),
        last_error_time=_time(message, "last_error_time"),
        consecutive_failures=message.consecutive_failures,
        concurrency_limit=message.concurrency_limit,
        concurrency_min=message.concurrency_min,
        concurrency_max=message.concurrency_max,
        adaptive=message.adaptive,
        rate_limit_episodes=message.rate_limit_episodes,
    )


# -- results ----------------------------------------------------------------------------------


def _interval(message: result_pb2.MetricUncertainty, field: str) -> MetricInterval | None:
    if not message.HasField(field):
        return None
    interval: result_pb2.MetricInterval = getattr(message, field)
    return MetricInterval(
        lower=interval.lower,
        upper=interval.upper,
        confidence_level=interval.confidence_level,
        method=_enum(
            IntervalMethod, result_pb2.IntervalMethod, interval.method, "INTERVAL_METHOD_"
        ),
        resamples=interval.resamples,
        seed=interval.seed,
    )


def _execution(message: result_pb2.ExecutionProfile) -> ExecutionProfile:
    # Every answer without usage: the token figures are unknown, not zero.
    usage_unknown = 0 < message.samples_succeeded <= message.samples_without_usage
    return ExecutionProfile(
        samples_total=message.samples_total,
        samples_succeeded=message.samples_succeeded,
        samples_failed=message.samples_failed,
        samples_cancelled=message.samples_cancelled,
        wall_time_s=_seconds(message.wall_time),
        latency_mean_ms=message.latency_mean_ms,
        latency_p50_ms=message.latency_p50_ms,
        latency_p90_ms=message.latency_p90_ms,
        latency_p99_ms=message.latency_p99_ms,
        ttft_p50_ms=_optional(message, "ttft_p50_ms"),
        ttft_p99_ms=_optional(message, "ttft_p99_ms"),
        prompt_tokens=None if usage_unknown else message.prompt_tokens,
        completion_tokens=None if usage_unknown else message.completion_tokens,
        tokens_per_second=None if usage_unknown else message.tokens_per_second,
        requests=message.requests,
        retries=message.retries,
        rate_limited=message.rate_limited,
        effective_concurrency=message.effective_concurrency,
        scoring_time_s=_seconds(message.scoring_time),
        samples_truncated=message.samples_truncated,
        samples_empty=message.samples_empty,
        samples_without_usage=message.samples_without_usage,
        decode_tokens_per_second=_optional(message, "decode_tokens_per_second"),
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
    )


def _worst(examples: Any) -> tuple[WorstExample, ...]:
    return tuple(_same_names(WorstExample, e) for e in examples)


def _classification(message: payloads_pb2.ClassificationPayload) -> ClassificationPayload:
    matrix = message.confusion_matrix
    return ClassificationPayload(
        labels=tuple(message.labels),
        confusion_matrix=ConfusionMatrix(
            labels=tuple(matrix.labels),
            rows=tuple(tuple(row.counts) for row in matrix.rows),
            unmapped=tuple(row.unmapped for row in matrix.rows),
        ),
        per_class=tuple(_same_names(ClassMetrics, m) for m in message.per_class),
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
            per_type=tuple(_same_names(EntityTypeMetrics, m) for m in ner.per_type),
            unparseable_outputs=ner.unparseable_outputs,
            worst_examples=_worst(ner.worst_examples),
        )
    if kind == "summarization":
        summarization = message.summarization
        return SummarizationPayload(
            rouge=tuple(_same_names(RougeScore, r) for r in summarization.rouge),
            stemming=summarization.stemming,
            worst_examples=_worst(summarization.worst_examples),
        )
    if kind == "generation":
        generation = message.generation
        return GenerationPayload(
            match_modes=tuple(_same_names(MatchModeStats, m) for m in generation.match_modes),
            worst_examples=_worst(generation.worst_examples),
        )
    if kind == "multiple_choice":
        choice = message.multiple_choice
        return MultipleChoicePayload(
            accuracy=choice.accuracy,
            unmapped_outputs=choice.unmapped_outputs,
            letters=tuple(_same_names(ChoiceLetterStats, m) for m in choice.letters),
            subjects=tuple(_same_names(SubjectAccuracy, m) for m in choice.subjects),
            subject_macro_accuracy=choice.subject_macro_accuracy,
            extraction_rules=tuple(
                _same_names(ExtractionRuleCount, m) for m in choice.extraction_rules
            ),
            logprob_scored=choice.logprob_scored,
            logprob_fallbacks=choice.logprob_fallbacks,
            worst_examples=_worst(choice.worst_examples),
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
            _same_names(RepeatStats, message.repeat_stats)
            if message.HasField("repeat_stats")
            else None
        ),
        status=_result_status(message.status),
        errors=tuple(eval_error_from_proto(e) for e in message.errors),
        provenance=_provenance(message.provenance),
        created_time=_time(message, "created_time"),
        payload=_payload(message),
        judge_execution=_execution(message.judge_execution_profile)
        if message.HasField("judge_execution_profile")
        else None,
    )
