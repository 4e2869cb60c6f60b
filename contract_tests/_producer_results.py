"""Today's producer, part 1: representative TaskEvaluationResults, one per payload.

Every shell field is set, so the fixtures and the old-consumer test exercise all of it.
"""

from datetime import UTC, datetime, timedelta

from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import Message

from evald.v1 import enums_pb2, errors_pb2, model_pb2, payloads_pb2, result_pb2, run_pb2

_T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def stamp(offset_s: float = 0.0) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(_T0 + timedelta(seconds=offset_s))
    return stamp


def duration(seconds: float) -> duration_pb2.Duration:
    value = duration_pb2.Duration()
    value.FromTimedelta(timedelta(seconds=seconds))
    return value


def generation_params() -> model_pb2.GenerationParams:
    return model_pb2.GenerationParams(
        temperature=0.0, max_tokens=64, top_p=1.0, seed=7, stop=["\n\n"]
    )


def eval_error(reason: str, category: str, http: int, retryable: bool) -> errors_pb2.EvalError:
    return errors_pb2.EvalError(
        category=errors_pb2.ErrorCategory.Value(f"ERROR_CATEGORY_{category}"),
        reason=errors_pb2.ErrorReason.Value(f"ERROR_REASON_{reason}"),
        message=f"{reason.lower()} on record r-0002",
        retryable=retryable,
        http_equivalent=http,
        metadata={"record_id": "r-0002", "attempt": "3"},
    )


def _worst(record_id: str, score: float, note: str) -> payloads_pb2.WorstExample:
    return payloads_pb2.WorstExample(
        record_id=record_id,
        repeat_index=1,
        input="Review: the plot drags.\nSentiment:",
        expected="negative",
        output="positive",
        score=score,
        note=note,
        truncated=False,
    )


def _shell(task_type: str, payload: Message) -> result_pb2.TaskEvaluationResult:
    """A result whose shell fields are all set; ``payload`` goes in its oneof member."""
    result = result_pb2.TaskEvaluationResult(
        task_id=f"task-{task_type.lower()}",
        run_id="run-0001",
        task_type=enums_pb2.TaskType.Value(f"TASK_TYPE_{task_type}"),
        model=model_pb2.ModelIdentity(
            model_id="sim-fast",
            provider="simulated",
            provider_model="sim-fast",
            params=generation_params(),
        ),
        benchmark=result_pb2.BenchmarkRef(
            name=f"{task_type.lower()}-mini",
            benchmark_version="2025-01",
            content_sha256="ab" * 32,
            record_count=40,
            dataset_id="ds-0001",
        ),
        metrics_summary={"accuracy": 0.75, "p99_latency_ms": 180.5},
        metric_uncertainty={
            "accuracy": result_pb2.MetricUncertainty(
                bootstrap=result_pb2.MetricInterval(
                    lower=0.625,
                    upper=0.875,
                    confidence_level=0.95,
                    method=result_pb2.INTERVAL_METHOD_BOOTSTRAP_PERCENTILE,
                    resamples=1000,
                    seed=12345,
                ),
                analytic=result_pb2.MetricInterval(
                    lower=0.5975,
                    upper=0.8575,
                    confidence_level=0.95,
                    method=result_pb2.INTERVAL_METHOD_WILSON,
                ),
            )
        },
        execution_profile=result_pb2.ExecutionProfile(
            samples_total=80,
            samples_succeeded=78,
            samples_failed=2,
            samples_cancelled=0,
            wall_time=duration(12.5),
            latency_mean_ms=95.25,
            latency_p50_ms=88.0,
            latency_p90_ms=140.0,
            latency_p99_ms=180.5,
            ttft_p50_ms=20.0,
            ttft_p99_ms=45.0,
            prompt_tokens=6400,
            completion_tokens=320,
            tokens_per_second=25.6,
            requests=84,
            retries=4,
            rate_limited=3,
            effective_concurrency=7.5,
            scoring_time=duration(0.25),
            samples_truncated=3,
            samples_empty=1,
            samples_without_usage=0,
            decode_tokens_per_second=31.25,
            cost=run_pb2.Cost(cost_usd=0.0192, estimated=False, tokens=6720, priced=True),
            cache_hits=5,
        ),
        judge_execution_profile=result_pb2.ExecutionProfile(
            samples_total=78,
            samples_succeeded=77,
            samples_failed=1,
            wall_time=duration(11.0),
            latency_mean_ms=310.0,
            latency_p50_ms=300.0,
            latency_p90_ms=420.0,
            latency_p99_ms=480.0,
            prompt_tokens=15600,
            completion_tokens=2340,
            requests=80,
            retries=2,
            effective_concurrency=2.2,
            cache_hits=0,
            cost=run_pb2.Cost(cost_usd=0.0031, estimated=False, tokens=17940, priced=True),
        ),
        reduced_metrics=[
            result_pb2.ReducedMetric(
                name="pass@2",
                value=0.75,
                interval=result_pb2.MetricInterval(
                    lower=0.6,
                    upper=0.88,
                    confidence_level=0.95,
                    method=result_pb2.INTERVAL_METHOD_BOOTSTRAP_PERCENTILE,
                    resamples=1000,
                    seed=0,
                ),
                records=39,
                records_skipped=1,
            )
        ],
        repeat_stats=result_pb2.RepeatStats(
            repeats=2, records=39, mean_within_record_stddev=0.125, consistent_record_fraction=0.9
        ),
        status=enums_pb2.RESULT_STATUS_PARTIAL_SUCCESS,
        errors=[eval_error("PROVIDER_TIMEOUT", "MODEL_PROVIDER_ERROR", 502, True)],
        provenance=result_pb2.Provenance(
            contract_version="1.0.0",
            evald_version="0.1.0",
            scorer=f"{task_type.lower()}@1",
            prompt_template_sha256="cd" * 32,
            dataset_sha256="ab" * 32,
            python_version="3.11.9",
            platform="Linux-6.8-x86_64",
            bootstrap_seed=12345,
            dependencies={"numpy": "2.1.0"},
            prompt_format=enums_pb2.PROMPT_FORMAT_PLAIN,
            rescored_from_run_id="run-0000",
            judge=result_pb2.JudgeProvenance(
                model=model_pb2.ModelIdentity(
                    model_id="judge-large",
                    provider="openai",
                    provider_model="judge-large-2025",
                    params=model_pb2.GenerationParams(temperature=0.0, max_tokens=256),
                ),
                rubric_sha256="ef" * 32,
                score_format=enums_pb2.JUDGE_SCORE_FORMAT_SCALE,
                scale_min=1,
                scale_max=5,
                pass_threshold=4.0,
                rounds=3,
                parse_retries=2,
                judged_samples=77,
                unjudged_samples=1,
            ),
        ),
        created_time=stamp(13),
    )
    getattr(result, task_type.lower()).CopyFrom(payload)
    return result


def result_classification() -> result_pb2.TaskEvaluationResult:
    labels = ["negative", "positive"]
    return _shell(
        "CLASSIFICATION",
        payloads_pb2.ClassificationPayload(
            labels=labels,
            confusion_matrix=payloads_pb2.ConfusionMatrix(
                labels=labels,
                rows=[
                    payloads_pb2.ConfusionMatrixRow(counts=[30, 8], unmapped=2),
                    payloads_pb2.ConfusionMatrixRow(counts=[10, 28], unmapped=0),
                ],
            ),
            per_class=[
                payloads_pb2.ClassMetrics(
                    label="negative", precision=0.75, recall=0.75, f1=0.75, support=40
                ),
                payloads_pb2.ClassMetrics(
                    label="positive", precision=0.778, recall=0.7, f1=0.737, support=38
                ),
            ],
            unmapped_outputs=2,
            worst_examples=[_worst("r-0007", 0.0, "predicted 'positive', gold 'negative'")],
        ),
    )


def result_qa() -> result_pb2.TaskEvaluationResult:
    return _shell(
        "QA",
        payloads_pb2.QaPayload(
            exact_match=0.625,
            f1=0.8125,
            answered=76,
            no_answer_outputs=2,
            worst_examples=[_worst("r-0011", 0.0, "no overlap with any reference")],
        ),
    )


def result_ner() -> result_pb2.TaskEvaluationResult:
    return _shell(
        "NER",
        payloads_pb2.NerPayload(
            per_type=[
                payloads_pb2.EntityTypeMetrics(
                    entity_type="LOC", precision=0.5, recall=0.25, f1=0.3333, support=8, predicted=4
                ),
                payloads_pb2.EntityTypeMetrics(
                    entity_type="PER", precision=1.0, recall=0.75, f1=0.8571, support=4, predicted=3
                ),
            ],
            unparseable_outputs=1,
            worst_examples=[_worst("r-0003", 0.0, "unparseable output")],
        ),
    )


def result_summarization() -> result_pb2.TaskEvaluationResult:
    return _shell(
        "SUMMARIZATION",
        payloads_pb2.SummarizationPayload(
            rouge=[
                payloads_pb2.RougeScore(
                    rouge_type=rouge_type, precision=0.5, recall=0.25 + i / 8, fmeasure=0.375
                )
                for i, rouge_type in enumerate(["rouge1", "rouge2", "rougeL", "rougeLsum"])
            ],
            stemming=True,
            worst_examples=[_worst("r-0020", 0.0625, "lowest rougeL")],
        ),
    )


def result_generation() -> result_pb2.TaskEvaluationResult:
    return _shell(
        "GENERATION",
        payloads_pb2.GenerationPayload(
            match_modes=[
                payloads_pb2.MatchModeStats(match_mode="exact", samples=50, correct=40),
                payloads_pb2.MatchModeStats(match_mode="regex", samples=30, correct=12),
            ],
            worst_examples=[_worst("r-0031", 0.0, "regex did not match")],
        ),
    )


def result_multiple_choice() -> result_pb2.TaskEvaluationResult:
    return _shell(
        "MULTIPLE_CHOICE",
        payloads_pb2.MultipleChoicePayload(
            accuracy=0.5,
            unmapped_outputs=1,
            letters=[
                payloads_pb2.ChoiceLetterStats(letter="A", gold=3, predicted=5, correct=2),
                payloads_pb2.ChoiceLetterStats(letter="B", gold=3, predicted=0, correct=0),
            ],
            subjects=[
                payloads_pb2.SubjectAccuracy(subject="anatomy", samples=4, correct=2, accuracy=0.5),
                payloads_pb2.SubjectAccuracy(subject="law", samples=2, correct=1, accuracy=0.5),
            ],
            subject_macro_accuracy=0.5,
            extraction_rules=[
                payloads_pb2.ExtractionRuleCount(rule="logprobs", samples=4),
                payloads_pb2.ExtractionRuleCount(rule="letter_dot", samples=1),
                payloads_pb2.ExtractionRuleCount(rule="unmapped", samples=1),
            ],
            logprob_scored=4,
            logprob_fallbacks=2,
            worst_examples=[_worst("r-0041", 0.0, "predicted A (logprobs), gold B")],
        ),
    )


def result_code() -> result_pb2.TaskEvaluationResult:
    return _shell(
        "CODE",
        payloads_pb2.CodePayload(
            pass_at_1=0.5,
            pass_at_k=[
                payloads_pb2.PassAtK(k=1, value=0.5, problems=4, problems_left_out=0),
                payloads_pb2.PassAtK(k=5, value=0.75, problems=3, problems_left_out=1),
            ],
            verdicts=[
                payloads_pb2.CodeVerdictCount(verdict="passed", samples=10),
                payloads_pb2.CodeVerdictCount(verdict="failed", samples=6),
                payloads_pb2.CodeVerdictCount(verdict="error", samples=2),
                payloads_pb2.CodeVerdictCount(verdict="timeout", samples=1),
                payloads_pb2.CodeVerdictCount(verdict="resource_limit", samples=0),
                payloads_pb2.CodeVerdictCount(verdict="no_program", samples=1),
            ],
            problems=4,
            extraction_rules=[
                payloads_pb2.ExtractionRuleCount(rule="fence", samples=19),
                payloads_pb2.ExtractionRuleCount(rule="none", samples=1),
            ],
            worst_examples=[_worst("HumanEval/7", 0.0, "timeout: wall-clock deadline (10 s)")],
        ),
    )


def result_tool_call() -> result_pb2.TaskEvaluationResult:
    return _shell(
        "TOOL_CALL",
        payloads_pb2.ToolCallPayload(
            exact_match=0.5,
            argument_accuracy=0.625,
            call_precision=0.6,
            call_recall=0.75,
            call_f1=2 / 3,
            no_call=1,
            malformed_arguments=1,
            wrong_name=1,
            extra_calls=1,
            wrong_argument_type=1,
            calls_made=5,
            calls_expected=4,
            worst_examples=[_worst("r-0051", 0.0, "malformed_arguments")],
        ),
    )


def result_structured_output() -> result_pb2.TaskEvaluationResult:
    return _shell(
        "STRUCTURED_OUTPUT",
        payloads_pb2.StructuredOutputPayload(
            schema_valid_rate=0.5,
            json_valid_rate=0.75,
            field_exact_match=0.25,
            field_f1=0.6,
            invalid_json=1,
            schema_violations=1,
            with_reference=4,
            worst_examples=[_worst("r-0061", 0.0, "not JSON: Expecting value")],
        ),
    )
