"""The result of one task (model × dataset): ``TaskEvaluation``, and what it is made of.

A ``TaskEvaluation`` is the domain form of ``evald.v1.TaskEvaluationResult``: identity,
the scorer's ``ScoreReport`` (None when nothing could be scored), the
``ExecutionProfile`` measured from the subtasks, a status, errors and provenance.
Stored as JSON; the per-sample scores are stored beside each subtask instead (for
ListSamples), so a report read back has an empty ``sample_scores``.

``assemble_evaluation`` puts one together once a task is scored: identity from the
stored task and dataset, the status its final state maps to, the errors (the scorer's
and one per reason samples failed with), and the provenance of this process.
"""

import dataclasses
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import evald_server
from evald_server.config import GenerationParams, Price
from evald_server.domain import (
    RESULT_STATUS,
    Cost,
    ErrorReason,
    EvalError,
    PromptFormat,
    ResultStatus,
    TaskState,
    TaskType,
    from_jsonable,
    to_jsonable,
)
from evald_server.scoring import (
    ReducedMetric,
    ScoreReport,
    UnscorableSample,
    scorer_dependencies,
)
from evald_server.store import DatasetRow, TaskRow

CONTRACT_VERSION = "1.5.0"


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    model_id: str
    provider: str
    provider_model: str
    params: GenerationParams  # effective: the model's defaults with the run's overrides
    # The price when the task was created: a config change later does not reprice it.
    price: Price | None = None

    def to_json(self) -> dict[str, Any]:
        data = {
            "model_id": self.model_id,
            "provider": self.provider,
            "provider_model": self.provider_model,
            "params": self.params.model_dump(mode="json"),
        }
        if self.price is not None:
            data["price"] = self.price.model_dump(mode="json")
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ModelIdentity":
        price = data.get("price")
        return cls(
            model_id=data["model_id"],
            provider=data["provider"],
            provider_model=data["provider_model"],
            params=GenerationParams.model_validate(data["params"]),
            price=None if price is None else Price.model_validate(price),
        )


@dataclass(frozen=True, slots=True)
class BenchmarkRef:
    name: str
    benchmark_version: str
    content_sha256: str
    record_count: int
    dataset_id: str = ""  # "" only in results stored before it was recorded


@dataclass(frozen=True, slots=True)
class ExecutionProfile:
    """How the inference of one task went, measured from its subtasks."""

    samples_total: int
    samples_succeeded: int
    samples_failed: int
    samples_cancelled: int
    wall_time_s: float  # first claim → the phase's last subtask terminal
    latency_mean_ms: float | None
    latency_p50_ms: float | None
    latency_p90_ms: float | None
    latency_p99_ms: float | None
    ttft_p50_ms: float | None  # only where the provider streams
    ttft_p99_ms: float | None
    prompt_tokens: int
    completion_tokens: int
    tokens_per_second: float  # task throughput: completion tokens per second of wall time
    requests: int  # provider calls, retries included
    retries: int
    rate_limited: int
    effective_concurrency: float  # Σ call time / wall time
    scoring_time_s: float
    # Defaults: results stored before these were counted read back without them.
    samples_truncated: int = 0  # finish_reason "length": max_tokens cut the answer
    samples_empty: int = 0
    samples_without_usage: int = 0  # token counts unknown (left out of the sums)
    decode_tokens_per_second: float | None = None  # Σ tokens / Σ (latency − TTFT), streamed
    cost: Cost | None = None  # of the successful calls (None in results stored before)
    cache_hits: int = 0  # samples answered from the response cache (no provider call)


@dataclass(frozen=True, slots=True)
class JudgeProvenance:
    """Who graded the answers, with which rubric and parameters."""

    model_id: str
    provider: str
    provider_model: str
    params: dict[str, Any]  # the judge's effective generation parameters
    rubric_sha256: str
    score_format: str
    scale_min: int
    scale_max: int
    pass_threshold: float
    rounds: int
    parse_retries: int
    judged_samples: int = 0  # answers with a verdict
    unjudged_samples: int = 0  # answers the judge could not grade


@dataclass(frozen=True, slots=True)
class Provenance:
    """Everything needed to reproduce the number."""

    contract_version: str
    evald_version: str
    scorer: str  # name@version ("" when nothing was scored)
    prompt_template_sha256: str
    dataset_sha256: str
    python_version: str
    platform: str
    bootstrap_seed: int
    dependencies: dict[str, str] = field(default_factory=dict)  # library → version
    judge: JudgeProvenance | None = None  # model-graded scoring, when the run asked for it
    # How the prompts reached the model (None: a result written before evald kept it).
    prompt_format: PromptFormat | None = None
    rescored_from: str | None = None  # RescoreRun: the run whose answers were scored again


@dataclass(frozen=True, slots=True)
class TaskEvaluation:
    task_id: str
    run_id: str
    task_type: TaskType
    model: ModelIdentity
    benchmark: BenchmarkRef
    status: ResultStatus
    report: ScoreReport | None
    profile: ExecutionProfile
    errors: tuple[EvalError, ...]
    provenance: Provenance
    created_at: float
    judge_profile: ExecutionProfile | None = None  # the judge's calls, counted apart
    # The run's reducers over each record's repeats (pass@k, pass^k, majority, mean),
    # in the order the run asked for them.
    reduced: tuple[ReducedMetric, ...] = ()

    @property
    def metrics_summary(self) -> dict[str, float]:
        """Headline metrics, flat: the scorer's plus the latency figures."""
        metrics = dict(self.report.metrics) if self.report is not None else {}
        for quantile in ("p50", "p90", "p99"):
            value = getattr(self.profile, f"latency_{quantile}_ms")
            if value is not None:
                metrics[f"{quantile}_latency_ms"] = value
        return metrics

    def to_json(self) -> dict[str, Any]:
        report = None
        if self.report is not None:
            report = to_jsonable(
                dataclasses.replace(self.report, sample_scores=[], correctness=None)
            )
        return {
            "task_id": self.task_id,
            "run_id": self.run_id,
            "task_type": self.task_type.value,
            "model": self.model.to_json(),
            "benchmark": to_jsonable(self.benchmark),
            "status": self.status.value,
            "report": report,
            "profile": to_jsonable(self.profile),
            "errors": [e.to_json() for e in self.errors],
            "provenance": to_jsonable(self.provenance),
            "created_at": self.created_at,
            "judge_profile": None
            if self.judge_profile is None
            else to_jsonable(self.judge_profile),
        } | ({"reduced": to_jsonable(self.reduced)} if self.reduced else {})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TaskEvaluation":
        report = data.get("report")
        return cls(
            task_id=data["task_id"],
            run_id=data["run_id"],
            task_type=TaskType(data["task_type"]),
            model=ModelIdentity.from_json(data["model"]),
            benchmark=from_jsonable(BenchmarkRef, data["benchmark"]),
            status=ResultStatus(data["status"]),
            report=None if report is None else from_jsonable(ScoreReport, report),
            profile=from_jsonable(ExecutionProfile, data["profile"]),
            errors=tuple(EvalError.from_json(e) for e in data.get("errors", ())),
            provenance=from_jsonable(Provenance, data["provenance"]),
            created_at=float(data["created_at"]),
            judge_profile=None
            if data.get("judge_profile") is None
            else from_jsonable(ExecutionProfile, data["judge_profile"]),
            reduced=from_jsonable(tuple[ReducedMetric, ...], data.get("reduced", [])),
        )


def failure_errors(
    failure_reasons: Iterable[tuple[str, int]], what: str = "sample(s)"
) -> list[EvalError]:
    """One error per reason ``what`` failed permanently with (reasons evald knows)."""
    return [
        EvalError.of(
            ErrorReason(reason),
            f"{count} {what} failed permanently with {reason}",
            samples=count,
        )
        for reason, count in failure_reasons
        if reason in ErrorReason.__members__.values()
    ]


def unscorable_error(scorer: str, samples: Sequence[UnscorableSample]) -> EvalError:
    """The error naming the samples a scorer raised on alone and left out."""
    named = ", ".join(s.record_id for s in samples[:_NAMED]) + (
        ", …" if len(samples) > _NAMED else ""
    )
    return EvalError.of(
        ErrorReason.SCORER_FAILED,
        f"scorer {scorer} raised on {len(samples)} sample(s) alone (records {named}; "
        f"the first: {samples[0].error}); they are flagged unscorable and left out of "
        "the metrics",
        samples=len(samples),
    )


_NAMED = 5  # records an error names; the samples' flags name every one


def assemble_evaluation(
    task: TaskRow,
    dataset: DatasetRow,
    *,
    state: TaskState,
    report: ScoreReport | None,
    profile: ExecutionProfile,
    errors: Iterable[EvalError],
    prompt_template_sha256: str,
    seed: int,
    now: float,
    judge: JudgeProvenance | None = None,
    judge_profile: ExecutionProfile | None = None,
    reduced: tuple[ReducedMetric, ...] = (),
    prompt_format: PromptFormat | None = None,
    rescored_from: str | None = None,
) -> TaskEvaluation:
    """The result of a scored task (``report`` None when nothing could be scored);
    ``judge`` and ``judge_profile`` when a judge model graded its answers."""
    return TaskEvaluation(
        task_id=task.task_id,
        run_id=task.run_id,
        task_type=dataset.task_type,
        model=ModelIdentity.from_json(task.model),
        benchmark=BenchmarkRef(
            dataset.name,
            dataset.benchmark_version,
            dataset.content_sha256,
            dataset.record_count,
            dataset_id=dataset.dataset_id,
        ),
        status=RESULT_STATUS[state],
        report=report,
        profile=profile,
        errors=tuple(errors),
        provenance=Provenance(
            contract_version=CONTRACT_VERSION,
            evald_version=evald_server.__version__,
            scorer=report.scorer if report is not None else "",
            prompt_template_sha256=prompt_template_sha256,
            dataset_sha256=dataset.content_sha256,
            python_version=platform.python_version(),
            platform=f"{sys.platform}-{platform.machine()}",
            bootstrap_seed=seed,
            dependencies=scorer_dependencies(dataset.task_type) if report is not None else {},
            judge=judge,
            prompt_format=prompt_format,
            rescored_from=rescored_from,
        ),
        created_at=now,
        judge_profile=judge_profile,
        reduced=reduced,
    )
