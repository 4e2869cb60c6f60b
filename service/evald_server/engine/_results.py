"""The result of one task (model × dataset): ``TaskEvaluation``, and what it is made of.

A ``TaskEvaluation`` is the domain form of ``evald.v1.TaskEvaluationResult``: identity,
the scorer's ``ScoreReport`` (None when nothing could be scored), the
``ExecutionProfile`` measured from the subtasks, a status, errors and provenance.
Stored as JSON; the per-sample scores are stored beside each subtask instead (for
ListSamples), so a report read back has an empty ``sample_scores``.
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from evald_server.config import GenerationParams
from evald_server.domain import EvalError, ResultStatus, TaskType, from_jsonable, to_jsonable
from evald_server.scoring import ScoreReport

CONTRACT_VERSION = "1.2.0"


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    model_id: str
    provider: str
    provider_model: str
    params: GenerationParams  # effective: the model's defaults with the run's overrides

    def to_json(self) -> dict[str, Any]:
        return {
            "model_id": self.model_id,
            "provider": self.provider,
            "provider_model": self.provider_model,
            "params": self.params.model_dump(mode="json"),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ModelIdentity":
        return cls(
            model_id=data["model_id"],
            provider=data["provider"],
            provider_model=data["provider_model"],
            params=GenerationParams.model_validate(data["params"]),
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
    wall_time_s: float  # first claim → last subtask terminal
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
            report = to_jsonable(dataclasses.replace(self.report, sample_scores=[]))
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
        }

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
        )
