"""A scorer's ScoreReport → the metric and payload parts of TaskEvaluationResult.

The scoring dataclasses carry the proto messages' field names, so most of them map
with ``_mirror``; only where the shapes differ (confusion rows, the generation
payload's ``per_mode``) is the mapping spelled out.
"""

import dataclasses
from typing import TypeVar

from google.protobuf.message import Message

from evald.v1 import payloads_pb2, result_pb2
from evald_server.scoring import (
    ClassificationPayload,
    CodePayload,
    GenerationPayload,
    IntervalMethod,
    MetricInterval,
    MultipleChoicePayload,
    NerPayload,
    Payload,
    QaPayload,
    ReducedMetric,
    ScoreReport,
    StructuredOutputPayload,
    SummarizationPayload,
    ToolCallPayload,
    WorstExample,
)

M = TypeVar("M", bound=Message)

_INTERVAL_METHODS = {
    IntervalMethod.BOOTSTRAP_PERCENTILE: result_pb2.INTERVAL_METHOD_BOOTSTRAP_PERCENTILE,
    IntervalMethod.WILSON: result_pb2.INTERVAL_METHOD_WILSON,
}


def _interval(interval: MetricInterval) -> result_pb2.MetricInterval:
    return result_pb2.MetricInterval(
        lower=interval.lower,
        upper=interval.upper,
        confidence_level=interval.confidence_level,
        method=_INTERVAL_METHODS[interval.method],
        resamples=interval.resamples,
        seed=interval.seed,
    )


def reduced_metric_to_proto(metric: ReducedMetric) -> result_pb2.ReducedMetric:
    return result_pb2.ReducedMetric(
        name=metric.name,
        value=metric.value,
        interval=_interval(metric.interval),
        records=metric.records,
        records_skipped=metric.skipped,
    )


def _mirror(message_class: type[M], value: object) -> M:
    """A proto message from a scoring dataclass whose fields carry the same names."""
    return message_class(**dataclasses.asdict(value))  # type: ignore[call-overload]


def _worst(examples: tuple[WorstExample, ...]) -> list[payloads_pb2.WorstExample]:
    return [_mirror(payloads_pb2.WorstExample, e) for e in examples]


def apply_score_report(report: ScoreReport, result: result_pb2.TaskEvaluationResult) -> None:
    """Fill metrics, intervals, repeat stats and the typed payload of ``result``."""
    result.metrics_summary.update(report.metrics)
    for name, uncertainty in report.uncertainty.items():
        target = result.metric_uncertainty[name]
        target.bootstrap.CopyFrom(_interval(uncertainty.bootstrap))
        if uncertainty.analytic is not None:
            target.analytic.CopyFrom(_interval(uncertainty.analytic))
    if report.repeat is not None:
        result.repeat_stats.CopyFrom(_mirror(result_pb2.RepeatStats, report.repeat))
    result.provenance.scorer = report.scorer
    _apply_payload(report.payload, result)


def _apply_payload(payload: Payload, result: result_pb2.TaskEvaluationResult) -> None:
    match payload:
        case ClassificationPayload():
            rows = [
                payloads_pb2.ConfusionMatrixRow(counts=counts, unmapped=unmapped)
                for counts, unmapped in zip(
                    payload.confusion, payload.unmapped_by_gold, strict=True
                )
            ]
            result.classification.CopyFrom(
                payloads_pb2.ClassificationPayload(
                    labels=payload.labels,
                    confusion_matrix=payloads_pb2.ConfusionMatrix(labels=payload.labels, rows=rows),
                    per_class=[_mirror(payloads_pb2.ClassMetrics, c) for c in payload.per_class],
                    unmapped_outputs=payload.unmapped_outputs,
                    worst_examples=_worst(payload.worst_examples),
                )
            )
        case ToolCallPayload():
            result.tool_call.CopyFrom(_mirror(payloads_pb2.ToolCallPayload, payload))
        case StructuredOutputPayload():
            result.structured_output.CopyFrom(
                _mirror(payloads_pb2.StructuredOutputPayload, payload)
            )
        case MultipleChoicePayload():
            result.multiple_choice.CopyFrom(_mirror(payloads_pb2.MultipleChoicePayload, payload))
        case QaPayload():
            result.qa.CopyFrom(_mirror(payloads_pb2.QaPayload, payload))
        case NerPayload():
            result.ner.CopyFrom(_mirror(payloads_pb2.NerPayload, payload))
        case SummarizationPayload():
            result.summarization.CopyFrom(_mirror(payloads_pb2.SummarizationPayload, payload))
        case GenerationPayload():
            result.generation.CopyFrom(
                payloads_pb2.GenerationPayload(
                    match_modes=[_mirror(payloads_pb2.MatchModeStats, m) for m in payload.per_mode],
                    worst_examples=_worst(payload.worst_examples),
                )
            )
        case CodePayload():
            result.code.CopyFrom(_mirror(payloads_pb2.CodePayload, payload))
