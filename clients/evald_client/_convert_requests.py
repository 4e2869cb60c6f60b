"""Request parts built from caller-supplied objects: generation params, retry policy,
dataset refs, prompt and per-dataset options.
"""

from typing import cast

from evald.v1 import dataset_pb2, enums_pb2, model_pb2, run_pb2
from evald_client._convert_common import CLASS_BUDGETS, duration, enum_to_proto
from evald_client._enums import ChoiceContinuation, ChoiceScoring, JudgeScoreFormat, PromptFormat
from evald_client._models import (
    Budget,
    DatasetOptions,
    DatasetRef,
    GenerationParams,
    JudgeOptions,
    PromptOptions,
    Reducer,
    RetryPolicy,
)


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
    message = run_pb2.RetryPolicy(backoff=[duration(s) for s in policy.backoff_s])
    if policy.max_retries is not None:
        message.max_retries = policy.max_retries
    if policy.jitter_fraction is not None:
        message.jitter_fraction = policy.jitter_fraction
    if policy.retry_after_cap_s is not None:
        message.retry_after_cap.CopyFrom(duration(policy.retry_after_cap_s))
    for name in CLASS_BUDGETS:
        if getattr(policy, name) is not None:
            setattr(message, name, getattr(policy, name))
    return message


def budget_to_proto(budget: Budget) -> run_pb2.RunBudget:
    message = run_pb2.RunBudget()
    if budget.max_cost_usd is not None:
        message.max_cost_usd = budget.max_cost_usd
    if budget.max_tokens is not None:
        message.max_tokens = budget.max_tokens
    return message


def dataset_ref_to_proto(ref: DatasetRef) -> dataset_pb2.DatasetRef:
    return dataset_pb2.DatasetRef(name=ref.name, benchmark_version=ref.version)


def prompt_to_proto(options: PromptOptions) -> dataset_pb2.PromptOptions:
    message = dataset_pb2.PromptOptions(
        shots=options.shots,
        shot_seed=options.shot_seed,
        shot_format=cast(
            enums_pb2.ShotFormat,
            enum_to_proto(options.shot_format, enums_pb2.ShotFormat, "SHOT_FORMAT_"),
        ),
    )
    if options.system_message is not None:
        message.system_message = options.system_message
    if options.shots_from is not None:
        message.shots_from.CopyFrom(dataset_ref_to_proto(options.shots_from))
    return message


def reducer_to_proto(reducer: Reducer) -> run_pb2.Reducer:
    kind = enum_to_proto(reducer.kind, enums_pb2.ReducerKind, "REDUCER_KIND_")
    return run_pb2.Reducer(kind=kind, k=reducer.k or 0)


def choice_scoring_to_proto(scoring: ChoiceScoring) -> enums_pb2.ChoiceScoring:
    value = enum_to_proto(scoring, enums_pb2.ChoiceScoring, "CHOICE_SCORING_")
    return cast(enums_pb2.ChoiceScoring, value)


def prompt_format_to_proto(value: PromptFormat) -> enums_pb2.PromptFormat:
    return cast(
        enums_pb2.PromptFormat, enum_to_proto(value, enums_pb2.PromptFormat, "PROMPT_FORMAT_")
    )


def dataset_options_to_proto(options: DatasetOptions) -> run_pb2.DatasetRunOptions:
    message = run_pb2.DatasetRunOptions(dataset=dataset_ref_to_proto(options.dataset))
    if options.generation is not None:
        message.generation_overrides.CopyFrom(generation_to_proto(options.generation))
    if options.prompt is not None:
        message.prompt.CopyFrom(prompt_to_proto(options.prompt))
    if options.choice_scoring is not None:
        message.choice_scoring = choice_scoring_to_proto(options.choice_scoring)
    if options.choice_continuation is not None:
        message.choice_continuation = cast(
            enums_pb2.ChoiceContinuation,
            enum_to_proto(
                ChoiceContinuation(options.choice_continuation),
                enums_pb2.ChoiceContinuation,
                "CHOICE_CONTINUATION_",
            ),
        )
    if options.prompt_format is not None:
        message.prompt_format = prompt_format_to_proto(PromptFormat(options.prompt_format))
    return message


def judge_options_to_proto(options: JudgeOptions) -> run_pb2.JudgeSpec:
    message = run_pb2.JudgeSpec(
        model_id=options.model_id,
        rubric=options.rubric,
        score_format=enum_to_proto(
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
