"""Prompt options and per-dataset run settings ⇄ evald.v1 (PromptOptions,
DatasetRunOptions, the ShotFormat, ChoiceScoring, ChoiceContinuation and PromptFormat
enums)."""

from enum import Enum
from typing import TypeVar

from evald.v1 import dataset_pb2, enums_pb2, run_pb2
from evald_server.api._convert_common import params_from_proto, params_to_proto
from evald_server.api._convert_enums import from_proto_enum, to_proto_enum
from evald_server.datasets import PromptOptions
from evald_server.domain import (
    ChoiceContinuation,
    ChoiceScoring,
    ErrorReason,
    FieldViolation,
    InvalidArgument,
    PromptFormat,
    ShotFormat,
    field_error,
)
from evald_server.engine import DatasetOptions, generation_params

_E = TypeVar("_E", bound=Enum)


def prompt_from_proto(
    message: dataset_pb2.PromptOptions, *, field: str, reason: ErrorReason
) -> PromptOptions:
    """``field`` and ``reason`` name an unknown shot format (upload header or run spec)."""
    shot_format = ShotFormat.SINGLE_MESSAGE
    if message.shot_format != enums_pb2.SHOT_FORMAT_UNSPECIFIED:
        known = from_proto_enum(ShotFormat, message.shot_format)
        if known is None:
            where = f"{field}.shot_format"
            raise field_error(
                where,
                f"unknown value {message.shot_format}",
                f"{where}: unknown value {message.shot_format}",
                reason=reason,
            )
        shot_format = known
    return PromptOptions(
        system_message=message.system_message if message.HasField("system_message") else None,
        shots=message.shots,
        shots_from=(message.shots_from.name, message.shots_from.benchmark_version)
        if message.HasField("shots_from")
        else None,
        shot_seed=message.shot_seed,
        shot_format=shot_format,
    )


def prompt_to_proto(options: PromptOptions) -> dataset_pb2.PromptOptions:
    message = dataset_pb2.PromptOptions(
        shots=options.shots,
        shot_seed=options.shot_seed,
        shot_format=to_proto_enum(options.shot_format),
    )
    if options.system_message is not None:
        message.system_message = options.system_message
    if options.shots_from is not None:
        name, version = options.shots_from
        message.shots_from.CopyFrom(dataset_pb2.DatasetRef(name=name, benchmark_version=version))
    return message


def choice_scoring_from_proto(value: int, field: str) -> ChoiceScoring | None:
    """None for unset; an unknown number is a bad request, not a silent default."""
    if value == enums_pb2.CHOICE_SCORING_UNSPECIFIED:
        return None
    scoring = from_proto_enum(ChoiceScoring, value)
    if scoring is None:
        raise field_error(
            field,
            f"unknown value {value}",
            f"invalid run spec: {field}: unknown value {value}",
            reason=ErrorReason.RUN_SPEC_INVALID,
        )
    return scoring


def optional_enum_from_proto(kind: type[_E], value: int, field: str) -> _E | None:
    """A settings enum (ChoiceContinuation, PromptFormat): None for unset; an unknown
    number is a bad request, not a silent default."""
    if value == 0:
        return None
    known = from_proto_enum(kind, value)
    if known is None:
        raise field_error(
            field,
            f"unknown value {value}",
            f"invalid run spec: {field}: unknown value {value}",
            reason=ErrorReason.RUN_SPEC_INVALID,
        )
    return known


def dataset_options_from_proto(message: run_pb2.DatasetRunOptions, index: int) -> DatasetOptions:
    params = None
    if message.HasField("generation_overrides"):
        try:
            params = generation_params(params_from_proto(message.generation_overrides))
        except InvalidArgument as error:
            wire = f"dataset_options[{index}].generation_overrides"
            error.field_violations = tuple(
                FieldViolation(v.field.replace("params", wire, 1), v.description)
                for v in error.field_violations
            )
            raise
    return DatasetOptions(
        name=message.dataset.name,
        benchmark_version=message.dataset.benchmark_version,
        params=params,
        prompt=prompt_from_proto(
            message.prompt,
            field=f"dataset_options[{index}].prompt",
            reason=ErrorReason.RUN_SPEC_INVALID,
        )
        if message.HasField("prompt")
        else None,
        choice_scoring=choice_scoring_from_proto(
            message.choice_scoring, f"dataset_options[{index}].choice_scoring"
        ),
        choice_continuation=optional_enum_from_proto(
            ChoiceContinuation,
            message.choice_continuation,
            f"dataset_options[{index}].choice_continuation",
        ),
        prompt_format=optional_enum_from_proto(
            PromptFormat, message.prompt_format, f"dataset_options[{index}].prompt_format"
        ),
    )


def dataset_options_to_proto(options: DatasetOptions) -> run_pb2.DatasetRunOptions:
    message = run_pb2.DatasetRunOptions(
        dataset=dataset_pb2.DatasetRef(
            name=options.name, benchmark_version=options.benchmark_version
        )
    )
    if options.params is not None:
        message.generation_overrides.CopyFrom(params_to_proto(options.params))
    if options.prompt is not None:
        message.prompt.CopyFrom(prompt_to_proto(options.prompt))
    if options.choice_scoring is not None:
        message.choice_scoring = to_proto_enum(options.choice_scoring)
    if options.choice_continuation is not None:
        message.choice_continuation = to_proto_enum(options.choice_continuation)
    if options.prompt_format is not None:
        message.prompt_format = to_proto_enum(options.prompt_format)
    return message
