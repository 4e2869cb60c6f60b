"""Model-graded scoring and the response cache ⇄ evald.v1: JudgeSpec, JudgeProvenance,
SampleJudgement."""

from evald.v1 import enums_pb2, model_pb2, result_pb2, run_pb2, sample_pb2
from evald_server.api._convert_common import eval_error_to_proto, params_from_proto, params_to_proto
from evald_server.api._convert_enums import from_proto_enum, to_proto_enum
from evald_server.config import GenerationParams
from evald_server.domain import (
    ErrorReason,
    InvalidArgument,
    JudgeScoreFormat,
    field_error,
)
from evald_server.engine import (
    DEFAULT_RUBRIC,
    AnswerJudgement,
    JudgeProvenance,
    JudgeSpec,
    generation_params,
)

_FIELD = "judge"


def judge_from_proto(message: run_pb2.JudgeSpec) -> JudgeSpec:
    """The run's judge settings (validated by RunSpec); proto defaults filled in."""
    score_format = JudgeScoreFormat.PASS_FAIL
    if message.score_format != enums_pb2.JUDGE_SCORE_FORMAT_UNSPECIFIED:
        parsed = from_proto_enum(JudgeScoreFormat, message.score_format)
        if parsed is None:
            field = f"{_FIELD}.score_format"
            raise field_error(
                field,
                f"unknown value {message.score_format}",
                f"invalid run spec: {field}: unknown value {message.score_format}",
                reason=ErrorReason.RUN_SPEC_INVALID,
            )
        score_format = parsed
    scale_min, scale_max = message.scale_min, message.scale_max
    if scale_min == scale_max == 0:
        scale_min, scale_max = 1, 5
    params: GenerationParams | None = None
    if message.HasField("generation_overrides"):
        try:
            params = generation_params(params_from_proto(message.generation_overrides))
        except InvalidArgument as error:
            error.with_field_paths(
                lambda f: f"{_FIELD}.generation_overrides" + f.removeprefix("params")
            )
            raise
    return JudgeSpec(
        model_id=message.model_id,
        rubric=message.rubric or DEFAULT_RUBRIC,
        score_format=score_format,
        scale_min=scale_min,
        scale_max=scale_max,
        pass_threshold=message.pass_threshold if message.HasField("pass_threshold") else None,
        rounds=message.rounds or 1,
        parse_retries=message.parse_retries if message.HasField("parse_retries") else 2,
        params=params,
    )


def judge_to_proto(spec: JudgeSpec) -> run_pb2.JudgeSpec:
    message = run_pb2.JudgeSpec(
        model_id=spec.model_id,
        rubric=spec.rubric,
        score_format=to_proto_enum(spec.score_format),
        scale_min=spec.scale_min,
        scale_max=spec.scale_max,
        rounds=spec.rounds,
        parse_retries=spec.parse_retries,
    )
    if spec.pass_threshold is not None:
        message.pass_threshold = spec.pass_threshold
    if spec.params is not None:
        message.generation_overrides.CopyFrom(params_to_proto(spec.params))
    return message


def judge_provenance_to_proto(judge: JudgeProvenance) -> result_pb2.JudgeProvenance:
    return result_pb2.JudgeProvenance(
        model=model_pb2.ModelIdentity(
            model_id=judge.model_id,
            provider=judge.provider,
            provider_model=judge.provider_model,
            params=params_to_proto(GenerationParams.model_validate(judge.params)),
        ),
        rubric_sha256=judge.rubric_sha256,
        score_format=to_proto_enum(JudgeScoreFormat(judge.score_format)),
        scale_min=judge.scale_min,
        scale_max=judge.scale_max,
        pass_threshold=judge.pass_threshold,
        rounds=judge.rounds,
        parse_retries=judge.parse_retries,
        judged_samples=judge.judged_samples,
        unjudged_samples=judge.unjudged_samples,
    )


def judgement_to_proto(judgement: AnswerJudgement) -> sample_pb2.SampleJudgement:
    message = sample_pb2.SampleJudgement(rationale=judgement.rationale, rounds=judgement.rounds)
    if judgement.score is not None:
        message.score = judgement.score
    if judgement.passed is not None:
        message.passed = judgement.passed
    if judgement.agreed is not None:
        message.agreed = judgement.agreed
    if judgement.error is not None:
        message.error.CopyFrom(eval_error_to_proto(judgement.error))
    return message
