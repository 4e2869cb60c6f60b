"""A scorer's ScoreReport → the metric and payload parts of TaskEvaluationResult."""

from evald.v1 import payloads_pb2, result_pb2
from evald_server.scoring import (
    ClassificationPayload,
    GenerationPayload,
    MetricInterval,
    NerPayload,
    QaPayload,
    RepeatStats,
    ScoreReport,
    SummarizationPayload,
    WorstExample,
)
from evald_server.scoring._types import IntervalMethod, Payload

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


def _worst(examples: tuple[WorstExample, ...]) -> list[payloads_pb2.WorstExample]:
    return [
        payloads_pb2.WorstExample(
            record_id=e.record_id,
            repeat_index=e.repeat_index,
            input=e.input,
            expected=e.expected,
            output=e.output,
            score=e.score,
            note=e.note,
        )
        for e in examples
    ]


def _repeat(stats: RepeatStats) -> result_pb2.RepeatStats:
    return result_pb2.RepeatStats(
        repeats=stats.repeats,
        records=stats.records,
        mean_within_record_stddev=stats.mean_within_record_stddev,
        consistent_record_fraction=stats.consistent_record_fraction,
    )


def apply_score_report(report: ScoreReport, result: result_pb2.TaskEvaluationResult) -> None:
    """Fill metrics, intervals, repeat stats and the typed payload of ``result``."""
    result.metrics_summary.update(report.metrics)
    for name, uncertainty in report.uncertainty.items():
        target = result.metric_uncertainty[name]
        target.bootstrap.CopyFrom(_interval(uncertainty.bootstrap))
        if uncertainty.analytic is not None:
            target.analytic.CopyFrom(_interval(uncertainty.analytic))
    if report.repeat is not None:
        result.repeat_stats.CopyFrom(_repeat(report.repeat))
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
                    per_class=[
                        payloads_pb2.ClassMetrics(
                            label=c.label,
                            precision=c.precision,
                            recall=c.recall,
                            f1=c.f1,
                            support=c.support,
                        )
                        for c in payload.per_class
                    ],
                    unmapped_outputs=payload.unmapped_outputs,
                    worst_examples=_worst(payload.worst_examples),
                )
            )
        case QaPayload():
            result.qa.CopyFrom(
                payloads_pb2.QaPayload(
                    exact_match=payload.exact_match,
                    f1=payload.f1,
                    answered=payload.answered,
                    no_answer_outputs=payload.no_answer_outputs,
                    worst_examples=_worst(payload.worst_examples),
                )
            )
        case NerPayload():
            result.ner.CopyFrom(
                payloads_pb2.NerPayload(
                    per_type=[
                        payloads_pb2.EntityTypeMetrics(
                            entity_type=t.entity_type,
                            precision=t.precision,
                            recall=t.recall,
                            f1=t.f1,
                            support=t.support,
                            predicted=t.predicted,
                        )
                        for t in payload.per_type
                    ],
                    unparseable_outputs=payload.unparseable_outputs,
                    worst_examples=_worst(payload.worst_examples),
                )
            )
        case SummarizationPayload():
            result.summarization.CopyFrom(
                payloads_pb2.SummarizationPayload(
                    rouge=[
                        payloads_pb2.RougeScore(
                            rouge_type=r.rouge_type,
                            precision=r.precision,
                            recall=r.recall,
                            fmeasure=r.fmeasure,
                        )
                        for r in payload.rouge
                    ],
                    stemming=payload.stemming,
                    worst_examples=_worst(payload.worst_examples),
                )
            )
        case GenerationPayload():
            result.generation.CopyFrom(
                payloads_pb2.GenerationPayload(
                    match_modes=[
                        payloads_pb2.MatchModeStats(
                            match_mode=m.match_mode, samples=m.samples, correct=m.correct
                        )
                        for m in payload.per_mode
                    ],
                    worst_examples=_worst(payload.worst_examples),
                )
            )
