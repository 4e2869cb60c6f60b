"""The report around the metrics: skipped samples, repeats, worst examples, pickling,
and the public surface of evald_server.scoring."""

import dataclasses
import math
import pickle
import random

import pytest

import evald_server.scoring as scoring
from evald_server.domain import TaskType
from evald_server.scoring import GenerationPayload, QaPayload, RepeatStats, score_task
from tests.scoring._factories import make_sample, samples_of
from tests.scoring.test_intervals import BUILDERS

YES = {"input": "q", "reference": "yes"}


def test_public_surface() -> None:
    assert sorted(scoring.__all__) == [
        "BaseScorer",
        "CORRECTNESS",
        "ChoiceLetterStats",
        "ClassMetrics",
        "ClassificationPayload",
        "CodePayload",
        "CodeVerdictCount",
        "Correctness",
        "EncodedPage",
        "EncodedSample",
        "EntityTypeMetrics",
        "Evaluation",
        "ExtractionRuleCount",
        "GenerationPayload",
        "IntervalMethod",
        "LOGLIKELIHOOD_MARK",
        "MatchModeStats",
        "MetricInterval",
        "MetricUncertainty",
        "MultipleChoicePayload",
        "NerPayload",
        "PageDecoder",
        "PassAtK",
        "Payload",
        "QaPayload",
        "RecordSamples",
        "ReducedMetric",
        "Reducer",
        "RepeatStats",
        "RougeScore",
        "SampleCorrectness",
        "SampleScore",
        "SampleScores",
        "SampleSource",
        "ScoreReport",
        "ScoredPage",
        "Scorer",
        "ScoringFailure",
        "ScoringPool",
        "ScoringSample",
        "StructuredOutputPayload",
        "SubjectAccuracy",
        "SummarizationPayload",
        "ToolCallPayload",
        "UNSCORABLE_FLAG",
        "UnscorableSample",
        "WorstExample",
        "bootstrap_distribution",
        "continuation_entries",
        "correctness_of",
        "majority_correct",
        "pass_at_k",
        "pass_hat_k",
        "percentile_interval",
        "read_samples",
        "record_samples",
        "reduce_records",
        "reduce_samples",
        "score_task",
        "scorer_dependencies",
        "scorer_for",
        "wilson_interval",
    ]
    for name in scoring.__all__:
        assert hasattr(scoring, name), name


@pytest.mark.parametrize("task_type", list(TaskType))
def test_every_task_type_has_a_versioned_scorer(task_type: TaskType) -> None:
    scorer = scoring.scorer_for(task_type)
    assert scorer.task_type is task_type
    assert scorer.name == task_type.value
    # generation 1.1.0: regex references are matched by RE2; classification 1.1.0: the
    # bootstrap draws counts per kind of record, 1.2.0: a negated label is not that label;
    # multiple_choice 1.1.0: verbatim choice texts first, signs, decimals and units kept;
    # 1.2.0: loglikelihood samples (acc, acc_norm, acc_bytes).
    versions = {
        TaskType.GENERATION: "1.1.0",
        TaskType.CLASSIFICATION: "1.2.0",
        TaskType.MULTIPLE_CHOICE: "1.2.0",
    }
    version = versions.get(task_type, "1.0.0")
    assert scorer.version == version
    report = score_task(task_type, [])
    assert report.scorer == f"{task_type.value}@{version}"


def test_failed_subtasks_are_skipped_not_scored() -> None:
    samples = samples_of([(YES, "yes"), (YES, None), (YES, "no")])
    report = score_task(TaskType.GENERATION, samples)
    assert (report.scored_samples, report.skipped_samples) == (2, 1)
    assert [s.subtask_id for s in report.sample_scores] == ["s0-0", "s2-0"]
    assert report.metrics == {"accuracy": 0.5}


def test_nothing_scored_means_no_headline_metrics() -> None:
    report = score_task(TaskType.QA, samples_of([({"question": "q", "answers": ["a"]}, None)]))
    assert (report.scored_samples, report.skipped_samples) == (0, 1)
    assert report.metrics == {}
    assert report.uncertainty == {}
    assert report.sample_scores == []
    assert isinstance(report.payload, QaPayload)
    assert report.payload.answered == 0
    assert report.payload.worst_examples == ()


def test_repeat_stats() -> None:
    # record → the outputs of its repeats (generation: each is correct or not)
    outputs: dict[str, list[str | None]] = {
        "A": ["yes", "yes", "yes"],
        "B": ["yes", "no"],
        "C": ["no", "no"],
        "D": ["yes"],  # one repeat: not measured
        "E": ["yes", None],  # the second repeat failed: one scored, not measured
    }
    samples = [
        make_sample(YES, output, index=i, record_id=record, repeat=k)
        for i, (record, values) in enumerate(outputs.items())
        for k, output in enumerate(values)
    ]
    report = score_task(TaskType.GENERATION, samples)
    repeat = report.repeat
    assert isinstance(repeat, RepeatStats)
    assert (repeat.repeats, repeat.records) == (3, 3)
    # Sample standard deviations: A 0, B sqrt(1/2), C 0.
    assert repeat.mean_within_record_stddev == pytest.approx(math.sqrt(0.5) / 3)
    assert repeat.consistent_record_fraction == pytest.approx(2 / 3)
    assert report.metrics["accuracy"] == pytest.approx(6 / 9)  # over all k × n scored


def test_no_repeat_stats_without_repeats() -> None:
    assert score_task(TaskType.GENERATION, samples_of([(YES, "yes"), (YES, "no")])).repeat is None


def test_worst_examples_are_bounded_ordered_and_truncated() -> None:
    long = "no " * 400
    pairs = [
        ({"question": f"q{i}", "answers": ["red sky"]}, out)
        for i, out in enumerate(
            ["red sky", "red", long, "sky red", "blue", "red sky", "nothing", "red skies"]
        )
    ]
    report = score_task(TaskType.QA, samples_of(pairs), worst_k=3)
    assert isinstance(report.payload, QaPayload)
    worst = report.payload.worst_examples
    assert [w.record_id for w in worst] == ["r2", "r4", "r6"]  # F1 0, in sample order
    assert all(w.score == 0.0 for w in worst)
    assert len(worst[0].output) == 500
    assert worst[0].output.endswith("…")
    assert worst[1].input == "q4"
    assert worst[1].expected == "red sky"
    everything = score_task(TaskType.QA, samples_of(pairs), worst_k=100)
    assert isinstance(everything.payload, QaPayload)
    # F1 is the primary score: "red sky" twice and "sky red" (F1 1) are never "worst".
    assert len(everything.payload.worst_examples) == 5
    scores = [w.score for w in everything.payload.worst_examples]
    assert scores == sorted(scores)


def test_worst_examples_prefer_the_rendered_prompt() -> None:
    sample = make_sample(YES, "no", index=0)
    with_prompt = dataclasses.replace(sample, input_text="Q: q\nA:")
    report = score_task(TaskType.GENERATION, [with_prompt])
    assert isinstance(report.payload, GenerationPayload)
    assert report.payload.worst_examples[0].input == "Q: q\nA:"


@pytest.mark.parametrize("task_type", list(TaskType))
def test_reports_survive_pickling(task_type: TaskType) -> None:
    report = score_task(task_type, BUILDERS[task_type](random.Random(0), 5))
    assert pickle.loads(pickle.dumps(report)) == report
