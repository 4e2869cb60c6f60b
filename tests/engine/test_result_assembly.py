"""A scored task's result assembled from its stored task and dataset: identity, status,
errors and provenance (engine/_results.py)."""

import platform

import evald_server
from evald_server.config import GenerationParams
from evald_server.domain import (
    Counters,
    ErrorReason,
    EvalError,
    ResultStatus,
    TaskState,
    TaskType,
)
from evald_server.engine import CONTRACT_VERSION, ExecutionProfile, ModelIdentity
from evald_server.engine._results import assemble_evaluation, failure_errors
from evald_server.scoring import ScoringSample, score_task
from evald_server.store import DatasetRow, TaskRow

MODEL = ModelIdentity("sim", "simulated", "sim", GenerationParams(temperature=0.0))
DATASET = DatasetRow("ds_1", "t", "sst", "1.0.0", TaskType.CLASSIFICATION, "c" * 64, 3, None, 1.0)
TASK = TaskRow(
    "run_1-t0", "run_1", 0, "sim", MODEL.to_json(), "ds_1", TaskState.SCORING,
    Counters(total=3, succeeded=2, failed_permanent=1), 1.0, None, None, "sst", "1.0.0",
    TaskType.CLASSIFICATION,
)  # fmt: skip
PROFILE = ExecutionProfile(
    3, 2, 1, 0, 1.0, 1.0, 1.0, 1.0, 1.0, None, None, 3, 3, 3.0, 3, 0, 0, 1.0, 0.1
)


def test_failure_errors_name_each_known_reason_with_its_count() -> None:
    errors = failure_errors([(ErrorReason.PROVIDER_TIMEOUT.value, 2), ("not_a_reason", 5)])
    assert [(e.reason, e.metadata["samples"]) for e in errors] == [
        (ErrorReason.PROVIDER_TIMEOUT, "2")
    ]


def test_a_scored_task_carries_its_identity_status_and_provenance() -> None:
    samples = [
        ScoringSample(str(i), f"r{i}", 0, {"label": "pos", "choices": ["pos", "neg"]}, "pos")
        for i in range(2)
    ]
    report = score_task(TaskType.CLASSIFICATION, samples, seed=7, resamples=20)
    timeout = EvalError.of(ErrorReason.PROVIDER_TIMEOUT, "1 failed", samples=1)
    evaluation = assemble_evaluation(
        TASK,
        DATASET,
        state=TaskState.PARTIAL,
        report=report,
        profile=PROFILE,
        errors=[timeout],
        prompt_template_sha256="p" * 64,
        seed=7,
        now=2.0,
    )
    assert (evaluation.task_id, evaluation.run_id, evaluation.model) == ("run_1-t0", "run_1", MODEL)
    assert evaluation.benchmark.content_sha256 == "c" * 64
    assert evaluation.benchmark.dataset_id == "ds_1"
    assert evaluation.status is ResultStatus.PARTIAL_SUCCESS
    assert evaluation.errors == (timeout,)
    provenance = evaluation.provenance
    assert provenance.contract_version == CONTRACT_VERSION
    assert provenance.evald_version == evald_server.__version__
    assert provenance.scorer == report.scorer
    assert provenance.python_version == platform.python_version()
    assert (provenance.prompt_template_sha256, provenance.bootstrap_seed) == ("p" * 64, 7)
    assert provenance.dependencies  # the scorer's libraries and versions


def test_nothing_scored_names_no_scorer_and_no_dependencies() -> None:
    evaluation = assemble_evaluation(
        TASK,
        DATASET,
        state=TaskState.FAILED,
        report=None,
        profile=PROFILE,
        errors=(),
        prompt_template_sha256="p" * 64,
        seed=0,
        now=2.0,
    )
    assert evaluation.status is ResultStatus.FAILED
    assert evaluation.report is None
    assert (evaluation.provenance.scorer, evaluation.provenance.dependencies) == ("", {})
