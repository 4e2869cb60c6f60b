"""Application objects ⇄ evald.v1 messages: datasets, models, runs, events, samples.

Results have their own module (``_convert_results``); this one holds the rest, so
that every proto ⇄ domain mapping lives in the api package and nowhere else.
"""

import re
from collections.abc import Sequence

from google.protobuf import json_format

from evald.v1 import dataset_pb2, event_pb2, model_pb2, run_pb2, sample_pb2
from evald_server.api._convert_common import (
    cost_to_proto,
    duration,
    eval_error_to_proto,
    params_from_proto,
    params_to_proto,
    retry_counts_to_proto,
    seconds_of,
    timestamp,
)
from evald_server.api._convert_enums import from_proto_enum, to_proto_enum
from evald_server.api._convert_judge import judge_from_proto, judge_to_proto, judgement_to_proto
from evald_server.api._convert_prompts import (
    choice_scoring_from_proto,
    dataset_options_from_proto,
    dataset_options_to_proto,
    optional_enum_from_proto,
    prompt_from_proto,
    prompt_to_proto,
)
from evald_server.api._convert_results import evaluation_to_proto
from evald_server.app import (
    Dataset,
    DatasetHeader,
    DatasetRef,
    ModelActivity,
    ModelInfo,
    RescoreSettings,
    RetryPolicy,
    Run,
    RunEvent,
    RunProgress,
    RunSpec,
    Sample,
    TaskEvaluation,
    TaskProgress,
)
from evald_server.domain import (
    Counters,
    ErrorReason,
    FieldViolation,
    FinishReason,
    InvalidArgument,
    PromptFormat,
    RunStateChanged,
    SampleFailure,
    TaskType,
)
from evald_server.engine import CLASS_BUDGETS, ReducerSpec, RunBudget, generation_params
from evald_server.scoring import Reducer

# -- requests → domain ---------------------------------------------------------------


def header_from_proto(header: dataset_pb2.UploadDatasetHeader) -> DatasetHeader:
    task_type = from_proto_enum(TaskType, header.task_type)
    if task_type is None:
        raise InvalidArgument(
            ErrorReason.DATASET_HEADER_INVALID,
            f"header.task_type: required ({', '.join(t.value for t in TaskType)})",
            metadata={"field": "header.task_type"},
            field_violations=(FieldViolation("header.task_type", "must be set"),),
        )
    return DatasetHeader(
        name=header.name,
        benchmark_version=header.benchmark_version,
        task_type=task_type,
        prompt_template=header.prompt_template if header.HasField("prompt_template") else None,
        request_id=header.request_id or None,
        prompt=prompt_from_proto(
            header.prompt, field="header.prompt", reason=ErrorReason.DATASET_HEADER_INVALID
        )
        if header.HasField("prompt")
        else None,
    )


def _retry_policy(message: run_pb2.RetryPolicy) -> RetryPolicy:
    defaults = RetryPolicy()
    return RetryPolicy(
        max_retries=message.max_retries
        if message.HasField("max_retries")
        else defaults.max_retries,
        backoff_s=tuple(seconds_of(d) for d in message.backoff) or defaults.backoff_s,
        jitter=message.jitter_fraction if message.HasField("jitter_fraction") else defaults.jitter,
        retry_after_cap_s=seconds_of(message.retry_after_cap)
        if message.HasField("retry_after_cap")
        else defaults.retry_after_cap_s,
        **{
            name: getattr(message, name) if message.HasField(name) else None
            for name in CLASS_BUDGETS.values()
        },
    )


def _budget(message: run_pb2.RunBudget) -> RunBudget:
    return RunBudget(
        max_cost_usd=message.max_cost_usd if message.HasField("max_cost_usd") else None,
        max_tokens=message.max_tokens if message.HasField("max_tokens") else None,
    )


# RunSpec names its fields as the domain does; the client set them in CreateRunRequest.
_SPEC_PATHS = {
    "models": "spec.model_ids",
    "params": "spec.generation_overrides",
    "retry_policy.backoff_s": "spec.retry_policy.backoff",
    "retry_policy.jitter": "spec.retry_policy.jitter_fraction",
    "retry_policy.retry_after_cap_s": "spec.retry_policy.retry_after_cap",
}


_DATASET_PARAMS = re.compile(r"^(dataset_options\[\d+\])\.params(?=$|[.\[])")


def _spec_path(field: str) -> str:
    # A dataset's own settings name their generation parameters as the run's do.
    field = _DATASET_PARAMS.sub(r"\1.generation_overrides", field)
    for domain, wire in _SPEC_PATHS.items():
        if field == domain or field.startswith((f"{domain}.", f"{domain}[")):
            return wire + field[len(domain) :]
    return f"spec.{field}"


def spec_from_proto(spec: run_pb2.RunSpec) -> RunSpec:
    """A validated RunSpec; every bad field is named by its path in CreateRunRequest
    (InvalidArgument RUN_SPEC_INVALID)."""
    try:
        return _spec_from_proto(spec)
    except InvalidArgument as error:
        error.with_field_paths(_spec_path)
        raise


def _spec_from_proto(spec: run_pb2.RunSpec) -> RunSpec:
    overrides = (
        generation_params(params_from_proto(spec.generation_overrides))
        if spec.HasField("generation_overrides")
        else None
    )
    return RunSpec(
        models=tuple(spec.model_ids),
        datasets=tuple(DatasetRef(d.name, d.benchmark_version) for d in spec.datasets),
        name=spec.name,
        repeat=spec.repeat or 1,
        max_concurrency=spec.max_concurrency if spec.HasField("max_concurrency") else None,
        retry_policy=_retry_policy(spec.retry_policy)
        if spec.HasField("retry_policy")
        else RetryPolicy(),
        params=overrides,
        labels=dict(spec.labels),
        dataset_options=tuple(
            dataset_options_from_proto(entry, i) for i, entry in enumerate(spec.dataset_options)
        ),
        prompt=prompt_from_proto(spec.prompt, field="prompt", reason=ErrorReason.RUN_SPEC_INVALID)
        if spec.HasField("prompt")
        else None,
        choice_scoring=choice_scoring_from_proto(spec.choice_scoring, "choice_scoring"),
        prompt_format=optional_enum_from_proto(PromptFormat, spec.prompt_format, "prompt_format"),
        budget=_budget(spec.budget) if spec.HasField("budget") else RunBudget(),
        judge=judge_from_proto(spec.judge) if spec.HasField("judge") else None,
        response_cache=spec.response_cache,
        reducers=_reducers(spec.reducers),
    )


def _reducers(entries: Sequence[run_pb2.Reducer]) -> tuple[ReducerSpec, ...]:
    """The spec's reducers; a kind that is unset or unknown to this server is named
    (RUN_SPEC_INVALID); k's rules are ``RunSpec``'s."""
    reducers = []
    for i, entry in enumerate(entries):
        kind = from_proto_enum(Reducer, entry.kind)
        if kind is None:
            field = f"reducers[{i}].kind"
            what = "must be one of PASS_AT_K, PASS_HAT_K, MAJORITY, MEAN"
            raise InvalidArgument(
                ErrorReason.RUN_SPEC_INVALID,
                f"invalid run spec: {field}: {what}, got {entry.kind}",
                field_violations=(FieldViolation(field, what),),
            )
        reducers.append(ReducerSpec(kind, entry.k or None))
    return tuple(reducers)


def rescore_settings_from_proto(message: run_pb2.RescoreSettings) -> RescoreSettings:
    """What RescoreRun changes; a bad field is named by its path in the request."""
    try:
        reducers = _reducers(message.reducers) if message.reducers else None
        scoring = choice_scoring_from_proto(message.choice_scoring, "choice_scoring")
    except InvalidArgument as error:
        error.with_field_paths(lambda field: f"settings.{field}")
        raise
    return RescoreSettings(reducers=reducers, choice_scoring=scoring)


# -- domain → responses --------------------------------------------------------------


def model_to_proto(model: ModelInfo) -> model_pb2.Model:
    return model_pb2.Model(
        model_id=model.model_id,
        provider=model.provider,
        provider_model=model.provider_model,
        max_concurrency=model.max_concurrency,
        timeout=duration(model.timeout_s),
        default_params=params_to_proto(model.default_params),
        streaming=model.streaming,
    )


def dataset_to_proto(dataset: Dataset) -> dataset_pb2.Dataset:
    message = dataset_pb2.Dataset(
        dataset_id=dataset.dataset_id,
        name=dataset.name,
        benchmark_version=dataset.benchmark_version,
        task_type=to_proto_enum(dataset.task_type),
        record_count=dataset.record_count,
        content_sha256=dataset.content_sha256,
        prompt_template=dataset.prompt_template or "",
        created_time=timestamp(dataset.created_at),
        size_bytes=dataset.size_bytes,
    )
    if dataset.prompt is not None:
        message.prompt.CopyFrom(prompt_to_proto(dataset.prompt))
    return message


def _counts(counters: Counters, in_flight: int) -> run_pb2.SubtaskCounts:
    """The store counts claimed subtasks as running; the contract's running is a call in
    flight, and the rest of the claimed ones are queued."""
    calls = min(in_flight, counters.running)
    return run_pb2.SubtaskCounts(
        total=counters.total,
        pending=counters.pending,
        queued=counters.running - calls,
        running=calls,
        retrying=counters.failed,
        succeeded=counters.succeeded,
        failed_permanent=counters.failed_permanent,
        cancelled=counters.cancelled,
    )


def _task_progress(task: TaskProgress) -> run_pb2.TaskProgress:
    message = run_pb2.TaskProgress(
        task_id=task.task_id,
        model_id=task.model_id,
        dataset=dataset_pb2.DatasetRef(
            name=task.dataset_name, benchmark_version=task.dataset_version
        ),
        task_type=to_proto_enum(task.task_type),
        state=to_proto_enum(task.state),
        counts=_counts(task.counters, task.in_flight),
    )
    if task.result_status is not None:
        message.result_status = to_proto_enum(task.result_status)
    return message


def progress_to_proto(progress: RunProgress) -> run_pb2.RunProgress:
    return run_pb2.RunProgress(
        counts=_counts(progress.counters, progress.in_flight),
        tasks=[_task_progress(t) for t in progress.tasks],
        cost=cost_to_proto(progress.cost),
    )


def _activity(model: ModelActivity) -> event_pb2.ModelActivity:
    message = event_pb2.ModelActivity(
        model_id=model.model_id,
        queued=model.queued,
        in_flight=model.in_flight,
        waiting_on=model.waiting_on,
        consecutive_failures=model.consecutive_failures,
        concurrency_limit=model.concurrency_limit,
        concurrency_min=model.concurrency_min,
        concurrency_max=model.concurrency_max,
        adaptive=model.adaptive,
        rate_limit_episodes=model.rate_limit_episodes,
        replicas=model.replicas,
        replicas_concurrency_limit=model.replicas_concurrency_limit,
        replicas_rate_limit_episodes=model.replicas_rate_limit_episodes,
    )
    if model.stalled_since is not None:
        message.stalled_since.CopyFrom(timestamp(model.stalled_since))
    if model.last_error is not None:
        message.last_error.CopyFrom(eval_error_to_proto(model.last_error))
    if model.last_error_at is not None:
        message.last_error_time.CopyFrom(timestamp(model.last_error_at))
    return message


def spec_to_proto(spec: RunSpec) -> run_pb2.RunSpec:
    message = run_pb2.RunSpec(
        name=spec.name,
        model_ids=spec.models,
        datasets=[
            dataset_pb2.DatasetRef(name=d.name, benchmark_version=d.benchmark_version)
            for d in spec.datasets
        ],
        repeat=spec.repeat,
        retry_policy=run_pb2.RetryPolicy(
            max_retries=spec.retry_policy.max_retries,
            backoff=[duration(s) for s in spec.retry_policy.backoff_s],
            jitter_fraction=spec.retry_policy.jitter,
            retry_after_cap=duration(spec.retry_policy.retry_after_cap_s),
        ),
        labels=dict(spec.labels),
    )
    for name in CLASS_BUDGETS.values():
        if getattr(spec.retry_policy, name) is not None:
            setattr(message.retry_policy, name, getattr(spec.retry_policy, name))
    if spec.budget.max_cost_usd is not None:
        message.budget.max_cost_usd = spec.budget.max_cost_usd
    if spec.budget.max_tokens is not None:
        message.budget.max_tokens = spec.budget.max_tokens
    if spec.max_concurrency is not None:
        message.max_concurrency = spec.max_concurrency
    if spec.params is not None:
        message.generation_overrides.CopyFrom(params_to_proto(spec.params))
    message.dataset_options.extend(dataset_options_to_proto(o) for o in spec.dataset_options)
    if spec.prompt is not None:
        message.prompt.CopyFrom(prompt_to_proto(spec.prompt))
    if spec.choice_scoring is not None:
        message.choice_scoring = to_proto_enum(spec.choice_scoring)
    if spec.prompt_format is not None:
        message.prompt_format = to_proto_enum(spec.prompt_format)
    if spec.judge is not None:
        message.judge.CopyFrom(judge_to_proto(spec.judge))
    message.response_cache = spec.response_cache
    message.reducers.extend(
        run_pb2.Reducer(kind=to_proto_enum(r.kind), k=r.k or 0) for r in spec.reducers
    )
    return message


def run_to_proto(run: Run) -> run_pb2.Run:
    message = run_pb2.Run(
        run_id=run.run_id,
        spec=spec_to_proto(run.spec),
        state=to_proto_enum(run.state),
        progress=progress_to_proto(run.progress),
        created_time=timestamp(run.created_at),
        last_seq=run.last_seq,
        request_id=run.request_id or "",
        cancel_requested=run.cancel_requested,
        cancel_reason=run.cancel_reason or "",
        rescored_from_run_id=run.spec.rescore_of or "",
    )
    if run.started_at is not None:
        message.started_time.CopyFrom(timestamp(run.started_at))
    if run.finished_at is not None:
        message.finished_time.CopyFrom(timestamp(run.finished_at))
    return message


def event_to_proto(event: RunEvent) -> event_pb2.RunEvent:
    """One RunEvent, as stored: a snapshot's ``completed_since_last`` is the progress
    tracker's count since the run's previous snapshot, the same for every watcher."""
    message = event_pb2.RunEvent(
        seq=event.seq, event_time=timestamp(event.time), run_id=event.run_id
    )
    match event.body:
        case RunStateChanged() as change:
            changed = message.state_changed
            changed.state = to_proto_enum(change.state)
            if change.previous is not None:
                changed.previous = to_proto_enum(change.previous)
            changed.cancel_requested = change.cancel_requested
            changed.cancel_reason = change.cancel_reason or ""
        case RunProgress() as progress:
            snapshot = message.progress
            snapshot.progress.CopyFrom(progress_to_proto(progress))
            snapshot.throughput_known = progress.throughput_known
            snapshot.throughput_per_s = (
                progress.throughput_per_s if progress.throughput_known else 0.0
            )
            if progress.eta_s is not None:
                snapshot.eta.CopyFrom(duration(progress.eta_s))
            snapshot.completed_since_last = progress.completed_since_last
            snapshot.models.extend(_activity(m) for m in progress.models)
        case TaskEvaluation() as evaluation:
            message.task_scored.result.CopyFrom(evaluation_to_proto(evaluation))
        case SampleFailure() as failure:
            message.sample_failed.CopyFrom(
                event_pb2.SampleFailed(
                    task_id=failure.task_id,
                    subtask_id=failure.subtask_id,
                    record_id=failure.record_id,
                    repeat_index=failure.repeat_index,
                    error=eval_error_to_proto(failure.error),
                    attempts=failure.attempts,
                    model_id=failure.model_id,
                    failed_attempts=retry_counts_to_proto(failure.failures),
                )
            )
        case None:
            message.heartbeat.current_seq = event.seq
    return message


def sample_to_proto(sample: Sample) -> sample_pb2.Sample:
    message = sample_pb2.Sample(
        subtask_id=sample.subtask_id,
        task_id=sample.task_id,
        model_id=sample.model_id,
        record_id=sample.record_id,
        repeat_index=sample.repeat_index,
        state=to_proto_enum(sample.state),
        input=sample.input,
        expected=sample.expected,
        output=sample.output or "",
        scores=dict(sample.scores),
        flags=sample.flags,
        attempts=sample.attempts,
        prompt_tokens=sample.prompt_tokens or 0,
        completion_tokens=sample.completion_tokens or 0,
        failed_attempts=retry_counts_to_proto(sample.failures),
    )
    if sample.cost is not None:
        message.cost.CopyFrom(cost_to_proto(sample.cost))
    if sample.finish_reason is not None:
        message.finish_reason = to_proto_enum(FinishReason.parse(sample.finish_reason))
    message.usage_reported = sample.usage_reported
    for name, full_bytes in sorted(sample.truncated.items()):
        message.truncated_fields.add(field=name, full_bytes=full_bytes)
    if sample.decode_tokens_per_second is not None:
        message.decode_tokens_per_second = sample.decode_tokens_per_second
    if sample.latency_ms is not None:
        message.latency_ms = sample.latency_ms
    if sample.ttft_ms is not None:
        message.ttft_ms = sample.ttft_ms
    if sample.first_error is not None:
        message.first_error.CopyFrom(eval_error_to_proto(sample.first_error))
    if sample.last_error is not None:
        message.last_error.CopyFrom(eval_error_to_proto(sample.last_error))
    if sample.finished_at is not None:
        message.finished_time.CopyFrom(timestamp(sample.finished_at))
    if sample.judgement is not None:
        message.judgement.CopyFrom(judgement_to_proto(sample.judgement))
    message.cache_hit = sample.cache_hit
    if sample.execution is not None:
        # Written by the engine from a SandboxResult: the message's own field names.
        json_format.ParseDict(dict(sample.execution), message.execution, ignore_unknown_fields=True)
    return message
