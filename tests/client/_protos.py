"""Builders of evald.v1 messages for the SDK's and CLI's tests."""

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

RUN_STATE = enums_pb2.RunState


def stamp(seconds: int = 1_700_000_000) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds)


def model(model_id: str, *, provider: str = "simulated") -> model_pb2.Model:
    return model_pb2.Model(
        model_id=model_id,
        provider=provider,
        provider_model=model_id,
        max_concurrency=4,
        timeout=duration_pb2.Duration(seconds=30),
        default_params=model_pb2.GenerationParams(temperature=0.0, max_tokens=64),
    )


def counts(total: int, succeeded: int = 0, failed: int = 0) -> run_pb2.SubtaskCounts:
    return run_pb2.SubtaskCounts(
        total=total,
        succeeded=succeeded,
        failed_permanent=failed,
        pending=total - succeeded - failed,
    )


def task(
    task_id: str,
    model_id: str,
    dataset: str,
    done: int,
    total: int = 10,
    failed: int = 0,
    state: int = enums_pb2.TASK_STATE_RUNNING,
) -> run_pb2.TaskProgress:
    return run_pb2.TaskProgress(
        task_id=task_id,
        model_id=model_id,
        dataset=dataset_pb2.DatasetRef(name=dataset, benchmark_version="1.0"),
        task_type=enums_pb2.TASK_TYPE_CLASSIFICATION,
        state=state,
        counts=counts(total, done - failed, failed),
    )


def run(
    run_id: str = "r-1",
    state: int = enums_pb2.RUN_STATE_RUNNING,
    *,
    done: int = 0,
    last_seq: int = 0,
) -> run_pb2.Run:
    tasks = [task("t-1", "sim-a", "sentiment", done), task("t-2", "sim-b", "sentiment", done)]
    return run_pb2.Run(
        run_id=run_id,
        spec=run_pb2.RunSpec(
            name="demo",
            model_ids=["sim-a", "sim-b"],
            datasets=[dataset_pb2.DatasetRef(name="sentiment", benchmark_version="1.0")],
            repeat=1,
            labels={"team": "eval"},
        ),
        state=state,
        progress=run_pb2.RunProgress(counts=counts(20, 2 * done), tasks=tasks),
        created_time=stamp(),
        last_seq=last_seq,
    )


def eval_error(reason: int = errors_pb2.ERROR_REASON_PROVIDER_TIMEOUT) -> errors_pb2.EvalError:
    return errors_pb2.EvalError(
        category=errors_pb2.ERROR_CATEGORY_MODEL_PROVIDER_ERROR,
        reason=reason,
        message="the provider did not answer within 30 s",
        retryable=True,
        http_equivalent=502,
        metadata={"timeout_s": "30"},
    )


def worst() -> payloads_pb2.WorstExample:
    return payloads_pb2.WorstExample(
        record_id="sent-007",
        repeat_index=0,
        input="The screen…",
        expected="positive",
        output="negative",
        score=0.0,
        note="predicted 'negative', gold 'positive'",
        truncated=True,
    )


def interval(lower: float, upper: float) -> result_pb2.MetricInterval:
    return result_pb2.MetricInterval(
        lower=lower,
        upper=upper,
        confidence_level=0.95,
        method=result_pb2.INTERVAL_METHOD_BOOTSTRAP_PERCENTILE,
        resamples=1000,
        seed=7,
    )


def result(
    task_id: str = "t-1", model_id: str = "sim-a", accuracy: float = 0.9, run_id: str = "r-1"
) -> result_pb2.TaskEvaluationResult:
    labels = ["positive", "negative"]
    return result_pb2.TaskEvaluationResult(
        task_id=task_id,
        run_id=run_id,
        task_type=enums_pb2.TASK_TYPE_CLASSIFICATION,
        model=model_pb2.ModelIdentity(
            model_id=model_id,
            provider="simulated",
            provider_model=model_id,
            params=model_pb2.GenerationParams(temperature=0.0, stop=["\n"]),
        ),
        benchmark=result_pb2.BenchmarkRef(
            name="sentiment",
            benchmark_version="1.0",
            content_sha256="ab" * 32,
            record_count=10,
            dataset_id="d-1",
        ),
        metrics_summary={"accuracy": accuracy, "f1_macro": accuracy - 0.05},
        metric_uncertainty={
            "accuracy": result_pb2.MetricUncertainty(
                bootstrap=interval(accuracy - 0.1, min(1.0, accuracy + 0.05)),
                analytic=interval(accuracy - 0.12, min(1.0, accuracy + 0.06)),
            )
        },
        execution_profile=result_pb2.ExecutionProfile(
            samples_total=10,
            samples_succeeded=9,
            samples_failed=1,
            wall_time=duration_pb2.Duration(seconds=2, nanos=500_000_000),
            latency_mean_ms=61.0,
            latency_p50_ms=58.0,
            latency_p90_ms=80.0,
            latency_p99_ms=95.5,
            ttft_p50_ms=12.0,
            prompt_tokens=400,
            completion_tokens=40,
            tokens_per_second=16.0,
            requests=11,
            retries=1,
            rate_limited=0,
            effective_concurrency=3.2,
            scoring_time=duration_pb2.Duration(nanos=20_000_000),
        ),
        repeat_stats=result_pb2.RepeatStats(
            repeats=2, records=10, mean_within_record_stddev=0.1, consistent_record_fraction=0.8
        ),
        status=enums_pb2.RESULT_STATUS_PARTIAL_SUCCESS,
        errors=[eval_error()],
        provenance=result_pb2.Provenance(
            contract_version="1.0.0",
            evald_version="0.1.0",
            scorer="classification@1",
            prompt_template_sha256="cd" * 32,
            dataset_sha256="ab" * 32,
            python_version="3.11.9",
            platform="Linux",
            bootstrap_seed=7,
            dependencies={"numpy": "2.0"},
        ),
        created_time=stamp(),
        classification=payloads_pb2.ClassificationPayload(
            labels=labels,
            confusion_matrix=payloads_pb2.ConfusionMatrix(
                labels=labels,
                rows=[
                    payloads_pb2.ConfusionMatrixRow(counts=[5, 1], unmapped=0),
                    payloads_pb2.ConfusionMatrixRow(counts=[0, 3], unmapped=1),
                ],
            ),
            per_class=[
                payloads_pb2.ClassMetrics(
                    label="positive", precision=1.0, recall=0.83, f1=0.91, support=6
                ),
                payloads_pb2.ClassMetrics(
                    label="negative", precision=0.75, recall=0.75, f1=0.75, support=4
                ),
            ],
            unmapped_outputs=1,
            worst_examples=[worst()],
        ),
    )


def sample(
    index: int, *, task_id: str = "t-1", state: int = enums_pb2.SUBTASK_STATE_SUCCEEDED
) -> sample_pb2.Sample:
    message = sample_pb2.Sample(
        subtask_id=f"s-{index}",
        task_id=task_id,
        model_id="sim-a",
        record_id=f"rec-{index}",
        state=state,
        input=f"input {index}",
        expected="positive",
        output="positive",
        scores={"correct": 1.0},
        attempts=1,
        prompt_tokens=10,
        completion_tokens=1,
        finished_time=stamp(),
    )
    if state == enums_pb2.SUBTASK_STATE_FAILED_PERMANENT:
        message.output = ""
        message.first_error.CopyFrom(eval_error())
        message.last_error.CopyFrom(eval_error(errors_pb2.ERROR_REASON_PROVIDER_HTTP_5XX))
    else:
        message.latency_ms = 50.0 + index
    return message


def event_log(run_id: str = "r-1", *, progress_steps: int = 5) -> list[event_pb2.RunEvent]:
    """A complete event log: pending → running, progress, a failure, two scored tasks,
    succeeded-partial; seq 1..n."""
    events: list[event_pb2.RunEvent] = []

    def add(**kind: object) -> None:
        events.append(
            event_pb2.RunEvent(seq=len(events) + 1, run_id=run_id, event_time=stamp(), **kind)
        )  # type: ignore[arg-type]

    add(state_changed=event_pb2.RunStateChanged(state=RUN_STATE.Value("RUN_STATE_PENDING")))
    add(
        state_changed=event_pb2.RunStateChanged(
            state=enums_pb2.RUN_STATE_RUNNING, previous=enums_pb2.RUN_STATE_PENDING
        )
    )
    for step in range(1, progress_steps + 1):
        done = 2 * step
        add(
            progress=event_pb2.ProgressSnapshot(
                progress=run(run_id, done=done).progress,
                throughput_per_s=4.0,
                eta=duration_pb2.Duration(seconds=max(0, 10 - done)),
                completed_since_last=4,
            )
        )
    add(
        sample_failed=event_pb2.SampleFailed(
            task_id="t-2",
            subtask_id="s-99",
            record_id="rec-9",
            repeat_index=0,
            error=eval_error(),
            attempts=4,
            model_id="sim-b",
        )
    )
    add(task_scored=event_pb2.TaskScored(result=result("t-1", "sim-a", 0.9, run_id)))
    add(task_scored=event_pb2.TaskScored(result=result("t-2", "sim-b", 0.7, run_id)))
    add(
        state_changed=event_pb2.RunStateChanged(
            state=enums_pb2.RUN_STATE_PARTIAL, previous=enums_pb2.RUN_STATE_RUNNING
        )
    )
    return events


def heartbeat(run_id: str, current_seq: int) -> event_pb2.RunEvent:
    return event_pb2.RunEvent(
        seq=current_seq, run_id=run_id, heartbeat=event_pb2.Heartbeat(current_seq=current_seq)
    )
