"""Today's producer: one representative message per fixture, by fixture name.

write_fixtures.py freezes these as the fixtures of a new contract version, and the
old-consumer test decodes them with the released baselines.
"""

from collections.abc import Callable

from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2

from contract_tests._producer_results import (
    duration,
    eval_error,
    generation_params,
    result_classification,
    result_code,
    result_generation,
    result_multiple_choice,
    result_ner,
    result_qa,
    result_structured_output,
    result_summarization,
    result_tool_call,
    stamp,
)
from evald.v1 import (
    comparison_pb2,
    dataset_pb2,
    enums_pb2,
    errors_pb2,
    event_pb2,
    model_pb2,
    result_pb2,
    run_pb2,
    sample_pb2,
    service_pb2,
)


def _progress() -> run_pb2.RunProgress:
    return run_pb2.RunProgress(
        counts=run_pb2.SubtaskCounts(
            total=160,
            pending=40,
            running=16,
            queued=6,
            retrying=4,
            succeeded=96,
            failed_permanent=2,
            cancelled=2,
        ),
        tasks=[
            run_pb2.TaskProgress(
                task_id="task-classification",
                model_id="sim-fast",
                dataset=dataset_pb2.DatasetRef(name="classification-mini", benchmark_version="v1"),
                task_type=enums_pb2.TASK_TYPE_CLASSIFICATION,
                state=enums_pb2.TASK_STATE_SUCCEEDED,
                counts=run_pb2.SubtaskCounts(total=80, succeeded=80),
                result_status=enums_pb2.RESULT_STATUS_SUCCESS,
            ),
            run_pb2.TaskProgress(
                task_id="task-qa",
                model_id="sim-fast",
                dataset=dataset_pb2.DatasetRef(name="qa-mini", benchmark_version="v1"),
                task_type=enums_pb2.TASK_TYPE_QA,
                state=enums_pb2.TASK_STATE_RUNNING,
                counts=run_pb2.SubtaskCounts(
                    total=80,
                    pending=40,
                    running=16,
                    retrying=4,
                    succeeded=16,
                    failed_permanent=2,
                    cancelled=2,
                ),
            ),
        ],
        cost=run_pb2.Cost(cost_usd=0.0125, estimated=True, tokens=5000, priced=True),
    )


def _prompt_options() -> dataset_pb2.PromptOptions:
    return dataset_pb2.PromptOptions(
        system_message="You are a careful expert.",
        shots=5,
        shots_from=dataset_pb2.DatasetRef(name="qa-dev", benchmark_version="v1"),
        shot_seed=1234,
        shot_format=enums_pb2.SHOT_FORMAT_CHAT_TURNS,
    )


def run() -> run_pb2.Run:
    return run_pb2.Run(
        run_id="run-0001",
        spec=run_pb2.RunSpec(
            name="nightly",
            model_ids=["sim-fast"],
            datasets=[
                dataset_pb2.DatasetRef(name="classification-mini", benchmark_version="v1"),
                dataset_pb2.DatasetRef(name="qa-mini", benchmark_version="v1"),
            ],
            max_concurrency=16,
            repeat=2,
            retry_policy=run_pb2.RetryPolicy(
                max_retries=3,
                backoff=[duration(0.5), duration(2)],
                jitter_fraction=0.25,
                retry_after_cap=duration(30),
                max_rate_limited_retries=20,
                max_timeout_retries=1,
                max_transient_retries=2,
            ),
            generation_overrides=model_pb2.GenerationParams(temperature=0.0),
            labels={"team": "search"},
            dataset_options=[
                run_pb2.DatasetRunOptions(
                    dataset=dataset_pb2.DatasetRef(name="qa-mini", benchmark_version="v1"),
                    generation_overrides=model_pb2.GenerationParams(max_tokens=16, stop=["\n"]),
                    prompt=_prompt_options(),
                    choice_scoring=enums_pb2.CHOICE_SCORING_LOGLIKELIHOOD,
                    choice_continuation=enums_pb2.CHOICE_CONTINUATION_TEXTS,
                    prompt_format=enums_pb2.PROMPT_FORMAT_PLAIN,
                )
            ],
            prompt=dataset_pb2.PromptOptions(system_message="Be brief."),
            choice_scoring=enums_pb2.CHOICE_SCORING_LOGPROBS,
            prompt_format=enums_pb2.PROMPT_FORMAT_CHAT,
            budget=run_pb2.RunBudget(max_cost_usd=2.5, max_tokens=1_000_000),
            judge=run_pb2.JudgeSpec(
                model_id="judge-large",
                rubric="Is {output} a correct answer to {input}? Reference: {reference}",
                score_format=enums_pb2.JUDGE_SCORE_FORMAT_SCALE,
                scale_min=1,
                scale_max=5,
                pass_threshold=4,
                rounds=3,
                parse_retries=2,
                generation_overrides=model_pb2.GenerationParams(temperature=0.0),
            ),
            response_cache=True,
            reducers=[
                run_pb2.Reducer(kind=enums_pb2.REDUCER_KIND_PASS_AT_K, k=2),
                run_pb2.Reducer(kind=enums_pb2.REDUCER_KIND_MAJORITY),
            ],
        ),
        state=enums_pb2.RUN_STATE_RUNNING,
        progress=_progress(),
        created_time=stamp(0),
        started_time=stamp(1),
        last_seq=42,
        request_id="req-7",
        cancel_reason="budget reached: spent 2.500120 USD of max_cost_usd 2.5",
        rescored_from_run_id="run-0000",
    )


def _event(seq: int, **kind: Message) -> event_pb2.RunEvent:
    return event_pb2.RunEvent(seq=seq, event_time=stamp(seq), run_id="run-0001", **kind)


def run_event_state_changed() -> event_pb2.RunEvent:
    changed = event_pb2.RunStateChanged(
        state=enums_pb2.RUN_STATE_RUNNING,
        previous=enums_pb2.RUN_STATE_PENDING,
        cancel_reason="budget reached: used 1000020 tokens of max_tokens 1000000",
    )
    return _event(1, state_changed=changed)


def run_event_progress() -> event_pb2.RunEvent:
    snapshot = event_pb2.ProgressSnapshot(
        progress=_progress(),
        throughput_per_s=12.5,
        eta=duration(5),
        completed_since_last=50,
        throughput_known=True,
        models=[
            event_pb2.ModelActivity(
                model_id="sim-fast",
                queued=6,
                in_flight=10,
                waiting_on=["model.max_concurrency"],
                stalled_since=stamp(4),
                last_error=eval_error("PROVIDER_HTTP_5XX", "MODEL_PROVIDER_ERROR", 502, True),
                last_error_time=stamp(5),
                consecutive_failures=3,
                concurrency_limit=12,
                concurrency_min=2,
                concurrency_max=16,
                adaptive=True,
                rate_limit_episodes=3,
                replicas=2,
                replicas_concurrency_limit=20,
                replicas_rate_limit_episodes=5,
            )
        ],
    )
    return _event(2, progress=snapshot)


def run_event_task_scored() -> event_pb2.RunEvent:
    return _event(3, task_scored=event_pb2.TaskScored(result=result_classification()))


def run_event_sample_failed() -> event_pb2.RunEvent:
    failed = event_pb2.SampleFailed(
        task_id="task-qa",
        subtask_id="st-0099",
        record_id="r-0002",
        repeat_index=1,
        error=eval_error("PROVIDER_HTTP_5XX", "MODEL_PROVIDER_ERROR", 502, True),
        attempts=4,
        model_id="sim-fast",
        failed_attempts=run_pb2.RetryCounts(rate_limited=2, timeout=1, transient=1),
    )
    return _event(4, sample_failed=failed)


def run_event_heartbeat() -> event_pb2.RunEvent:
    return _event(4, heartbeat=event_pb2.Heartbeat(current_seq=4))


def eval_error_dataset_invalid() -> errors_pb2.EvalError:
    return eval_error("DATASET_FIELD_MISSING", "DATASET_INVALID", 400, False)


def eval_error_model_provider_error() -> errors_pb2.EvalError:
    return eval_error("PROVIDER_RATE_LIMITED", "MODEL_PROVIDER_ERROR", 502, True)


def eval_error_eval_operator_error() -> errors_pb2.EvalError:
    return eval_error("SCORER_FAILED", "EVAL_OPERATOR_ERROR", 500, False)


def eval_error_request_invalid() -> errors_pb2.EvalError:
    return eval_error("RUN_NOT_FOUND", "REQUEST_INVALID", 404, False)


def sample() -> sample_pb2.Sample:
    return sample_pb2.Sample(
        subtask_id="st-0099",
        task_id="task-qa",
        model_id="sim-fast",
        record_id="r-0002",
        repeat_index=1,
        state=enums_pb2.SUBTASK_STATE_SUCCEEDED,
        input="Q: Who wrote Hamlet?\nA:",
        expected='["Shakespeare", "William Shakespeare"]',
        output="Shakespeare",
        scores={"exact_match": 1.0, "f1": 1.0},
        flags=["retried"],
        attempts=2,
        latency_ms=88.5,
        ttft_ms=21.0,
        prompt_tokens=12,
        completion_tokens=3,
        first_error=eval_error("PROVIDER_RATE_LIMITED", "MODEL_PROVIDER_ERROR", 502, True),
        last_error=eval_error("PROVIDER_RATE_LIMITED", "MODEL_PROVIDER_ERROR", 502, True),
        finished_time=stamp(9),
        finish_reason=sample_pb2.FINISH_REASON_STOP,
        usage_reported=True,
        decode_tokens_per_second=42.5,
        truncated_fields=[sample_pb2.TruncatedField(field="input", full_bytes=9_437_184)],
        cost=run_pb2.Cost(cost_usd=0.000039, estimated=False, tokens=15, priced=True),
        failed_attempts=run_pb2.RetryCounts(rate_limited=1),
        judgement=sample_pb2.SampleJudgement(
            score=4.0,
            passed=True,
            rationale="Names the author the reference names.",
            rounds=3,
            agreed=False,
            error=eval_error("JUDGE_VERDICT_UNPARSEABLE", "MODEL_PROVIDER_ERROR", 502, True),
        ),
        cache_hit=True,
        execution=sample_pb2.CodeExecution(
            verdict="failed",
            reason="test 1 failed",
            error_type="AssertionError",
            traceback='  File "<test 1>", line 1\nAssertionError',
            resource="",
            tests=[
                sample_pb2.CodeTestOutcome(index=0, status="passed"),
                sample_pb2.CodeTestOutcome(
                    index=1, status="failed", error_type="AssertionError", detail="AssertionError"
                ),
            ],
            extraction_rule="fence",
            duration_ms=143.5,
            stdout="checking\n",
            stderr="",
            output_truncated=False,
        ),
    )


def list_models_response() -> service_pb2.ListModelsResponse:
    model = model_pb2.Model(
        model_id="sim-fast",
        provider="simulated",
        provider_model="sim-fast",
        max_concurrency=64,
        timeout=duration(60),
        default_params=generation_params(),
        streaming=True,
    )
    return service_pb2.ListModelsResponse(models=[model])


def upload_dataset_header() -> service_pb2.UploadDatasetRequest:
    header = dataset_pb2.UploadDatasetHeader(
        name="qa-mini",
        benchmark_version="v1",
        task_type=enums_pb2.TASK_TYPE_QA,
        prompt_template="Q: {question}\nA:",
        request_id="req-1",
        prompt=_prompt_options(),
    )
    return service_pb2.UploadDatasetRequest(header=header)


def upload_dataset_chunk() -> service_pb2.UploadDatasetRequest:
    return service_pb2.UploadDatasetRequest(
        chunk=b'{"id": "r-0001", "question": "Who wrote Hamlet?", "answers": ["Shakespeare"]}\n'
    )


def upload_dataset_response() -> service_pb2.UploadDatasetResponse:
    dataset = dataset_pb2.Dataset(
        dataset_id="ds-0001",
        name="qa-mini",
        benchmark_version="v1",
        task_type=enums_pb2.TASK_TYPE_QA,
        record_count=40,
        content_sha256="ab" * 32,
        prompt_template="Q: {question}\nA:",
        created_time=stamp(0),
        size_bytes=4096,
        prompt=_prompt_options(),
    )
    return service_pb2.UploadDatasetResponse(dataset=dataset, created=True)


def create_run_request() -> service_pb2.CreateRunRequest:
    return service_pb2.CreateRunRequest(spec=run().spec, request_id="req-7")


def retry_run_request() -> service_pb2.RetryRunRequest:
    return service_pb2.RetryRunRequest(
        run_id="run-0001",
        task_ids=["task-qa"],
        categories=[errors_pb2.ERROR_CATEGORY_MODEL_PROVIDER_ERROR],
        reasons=[errors_pb2.ERROR_REASON_PROVIDER_RATE_LIMITED],
        states=[enums_pb2.SUBTASK_STATE_FAILED_PERMANENT, enums_pb2.SUBTASK_STATE_CANCELLED],
    )


def compare_runs_response() -> service_pb2.CompareRunsResponse:
    metric = comparison_pb2.MetricComparison(
        metric="accuracy",
        baseline_value=0.9,
        candidate_value=0.75,
        delta=-0.15,
        delta_interval=result_pb2.MetricInterval(
            lower=-0.25,
            upper=-0.05,
            confidence_level=0.95,
            method=result_pb2.INTERVAL_METHOD_BOOTSTRAP_PERCENTILE,
            resamples=1000,
            seed=7,
        ),
        p_value=0.0021,
        test=comparison_pb2.PAIRED_TEST_MCNEMAR_EXACT,
        records_improved=2,
        records_worsened=14,
        records_unchanged=64,
        record_score="correct",
    )
    return service_pb2.CompareRunsResponse(
        comparison=comparison_pb2.RunComparison(
            baseline_run_id="run-0001",
            candidate_run_id="run-0002",
            task_pairing=comparison_pb2.TASK_PAIRING_MODEL_POSITION,
            tasks=[
                comparison_pb2.TaskComparison(
                    baseline_task_id="task-qa",
                    candidate_task_id="task-qa-2",
                    baseline_model_id="sim-fast",
                    candidate_model_id="sim-new",
                    dataset_name="qa-mini",
                    benchmark_version="v1",
                    task_type=enums_pb2.TASK_TYPE_QA,
                    paired_samples=80,
                    paired_records=80,
                    baseline_only_records=1,
                    candidate_only_records=0,
                    baseline_only_record_ids=["r-0081"],
                    metrics=[metric],
                )
            ],
            unmatched_tasks=[
                comparison_pb2.UnmatchedTask(
                    run_id="run-0002",
                    task_id="task-ner",
                    model_id="sim-new",
                    dataset_name="ner-mini",
                    benchmark_version="v1",
                )
            ],
            confidence_level=0.95,
            resamples=1000,
            permutations=10000,
            seed=7,
        )
    )


def watch_run_response() -> service_pb2.WatchRunResponse:
    return service_pb2.WatchRunResponse(event=run_event_sample_failed())


def rpc_status_dataset_invalid() -> status_pb2.Status:
    """The wire shape of an RPC error: google.rpc.Status + ErrorInfo + BadRequest."""
    status = status_pb2.Status(
        code=code_pb2.INVALID_ARGUMENT, message="line 12: field 'label' is missing"
    )
    info = error_details_pb2.ErrorInfo(
        reason="DATASET_FIELD_MISSING", domain="evald", metadata={"line": "12", "field": "label"}
    )
    status.details.add().Pack(info, deterministic=True)
    violation = error_details_pb2.BadRequest.FieldViolation(
        field="records[11].label", description="required for TASK_TYPE_CLASSIFICATION"
    )
    status.details.add().Pack(
        error_details_pb2.BadRequest(field_violations=[violation]), deterministic=True
    )
    return status


def rpc_status_server_draining() -> status_pb2.Status:
    """An RPC error a client may retry later: ErrorInfo + RetryInfo."""
    status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message="server is draining")
    info = error_details_pb2.ErrorInfo(reason="SERVER_DRAINING", domain="evald")
    status.details.add().Pack(info, deterministic=True)
    retry = error_details_pb2.RetryInfo(retry_delay=duration(2))
    status.details.add().Pack(retry, deterministic=True)
    return status


BUILDERS: dict[str, Callable[[], Message]] = {
    builder.__name__: builder
    for builder in (
        result_classification,
        result_qa,
        result_ner,
        result_summarization,
        result_generation,
        result_multiple_choice,
        result_code,
        result_tool_call,
        result_structured_output,
        run,
        run_event_state_changed,
        run_event_progress,
        run_event_task_scored,
        run_event_sample_failed,
        run_event_heartbeat,
        eval_error_dataset_invalid,
        eval_error_model_provider_error,
        eval_error_eval_operator_error,
        eval_error_request_invalid,
        sample,
        list_models_response,
        upload_dataset_header,
        upload_dataset_chunk,
        upload_dataset_response,
        create_run_request,
        retry_run_request,
        compare_runs_response,
        watch_run_response,
        rpc_status_dataset_invalid,
        rpc_status_server_draining,
    )
}


def build_fixtures() -> dict[str, Message]:
    """Every representative message, by fixture name."""
    return {name: builder() for name, builder in BUILDERS.items()}
