"""What a client submits: a ``RunSpec`` (models × dataset versions, limits, retries).

Built from plain values (the gRPC servicer converts proto → ``RunSpec``); it validates
itself on construction, naming every bad field, and has one canonical JSON form that
is stored with the run and hashed for request idempotency.
"""

import hashlib
import json
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from evald_server.config import GenerationParams
from evald_server.datasets import PromptOptions
from evald_server.domain import (
    ChoiceContinuation,
    ChoiceScoring,
    ErrorReason,
    FieldViolation,
    InvalidArgument,
    PromptFormat,
    TaskType,
)
from evald_server.engine._cost import RunBudget
from evald_server.engine._dataset_options import DatasetOptions, options_problems
from evald_server.engine._judge_spec import JudgeSpec
from evald_server.engine._reducer_spec import MAX_REDUCERS, ReducerSpec, reducer_problems
from evald_server.engine._retry_policy import RetryPolicy

MAX_REPEAT = 100
MAX_LABELS = 64
MAX_NAME_CHARS = 256
MAX_DATASETS = 64
MAX_DATASET_REF_CHARS = 128  # what an upload allows for a name, and then some


@dataclass(frozen=True, slots=True)
class DatasetRef:
    """A dataset version by name, as clients refer to it."""

    name: str
    benchmark_version: str


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One evaluation request: every model × every dataset, ``repeat`` times each record."""

    models: tuple[str, ...]
    datasets: tuple[DatasetRef, ...]
    name: str = ""
    repeat: int = 1
    max_concurrency: int | None = None
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    params: GenerationParams | None = None  # overrides every model's default params
    labels: Mapping[str, str] = field(default_factory=dict)
    seed: int = 0  # bootstrap seed of the metric intervals
    scoring_timeout_s: float = 600.0
    # Per-dataset settings and the run-wide prompt and choice scoring (_dataset_options).
    dataset_options: tuple[DatasetOptions, ...] = ()
    prompt: PromptOptions | None = None
    choice_scoring: ChoiceScoring | None = None
    budget: RunBudget = field(default_factory=RunBudget)  # max_cost_usd / max_tokens
    judge: JudgeSpec | None = None  # model-graded scoring of every answer
    response_cache: bool = False  # answer from (and fill) the response cache
    reducers: tuple[ReducerSpec, ...] = ()  # over each record's repeats (_reducer_spec)
    prompt_format: PromptFormat | None = None  # None: chat (loglikelihood: plain)
    # A run made by RescoreRun: the run whose stored answers it scores again.
    rescore_of: str | None = None

    def __post_init__(self) -> None:
        problems = list(_problems(self)) + _dataset_problems(self)
        if problems:
            raise InvalidArgument(
                ErrorReason.RUN_SPEC_INVALID,
                "invalid run spec: " + "; ".join(f"{n}: {w}" for n, w in problems),
                field_violations=tuple(FieldViolation(n, w) for n, w in problems),
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "datasets": [
                {"name": d.name, "benchmark_version": d.benchmark_version} for d in self.datasets
            ],
            "name": self.name,
            "repeat": self.repeat,
            "max_concurrency": self.max_concurrency,
            "retry_policy": self.retry_policy.to_json(),
            "params": None
            if self.params is None
            else self.params.model_dump(mode="json", exclude_unset=True),
            "labels": dict(sorted(self.labels.items())),
            "seed": self.seed,
            "scoring_timeout_s": self.scoring_timeout_s,
        } | self._dataset_json()

    def _dataset_json(self) -> dict[str, Any]:
        """Only what is set, so that specs without it keep their body hash."""
        data: dict[str, Any] = {}
        if self.dataset_options:
            data["dataset_options"] = [o.to_json() for o in self.dataset_options]
        if self.prompt is not None:
            data["prompt"] = self.prompt.to_json()
        if self.choice_scoring is not None:
            data["choice_scoring"] = self.choice_scoring.value
        if self.budget.limited:
            data["budget"] = self.budget.to_json()
        if self.judge is not None:
            data["judge"] = self.judge.to_json()
        if self.response_cache:
            data["response_cache"] = True
        if self.reducers:
            data["reducers"] = [r.to_json() for r in self.reducers]
        if self.prompt_format is not None:
            data["prompt_format"] = self.prompt_format.value
        if self.rescore_of is not None:
            data["rescore_of"] = self.rescore_of
        return data

    def options_for(self, ref: DatasetRef) -> DatasetOptions | None:
        for entry in self.dataset_options:
            if (entry.name, entry.benchmark_version) == (ref.name, ref.benchmark_version):
                return entry
        return None

    def params_for(
        self, model_params: GenerationParams, ref: DatasetRef, task_type: TaskType
    ) -> GenerationParams:
        """Effective parameters: the model's, then the run's, then the dataset's. A
        multiple-choice dataset scored by log-probabilities generates one token unless
        its own settings give ``max_tokens``."""
        entry = self.options_for(ref)
        merged = model_params.merged(self.params)
        if entry is not None:
            merged = merged.merged(entry.params)
        own_max_tokens = (
            entry is not None
            and entry.params is not None
            and ("max_tokens" in entry.params.model_fields_set)
        )
        logprobs = self.choice_scoring_for(ref) is ChoiceScoring.LOGPROBS
        if task_type is TaskType.MULTIPLE_CHOICE and logprobs and not own_max_tokens:
            merged = merged.model_copy(update={"max_tokens": 1})
        return merged

    def prompt_for(self, ref: DatasetRef) -> PromptOptions | None:
        """The run's prompt options for a dataset; None means the dataset's own."""
        entry = self.options_for(ref)
        if entry is not None and entry.prompt is not None:
            return entry.prompt
        return self.prompt

    def choice_scoring_for(self, ref: DatasetRef) -> ChoiceScoring:
        entry = self.options_for(ref)
        if entry is not None and entry.choice_scoring is not None:
            return entry.choice_scoring
        return self.choice_scoring or ChoiceScoring.TEXT

    def continuation_for(self, ref: DatasetRef) -> ChoiceContinuation:
        """Loglikelihood scoring's continuations for a dataset (letters unless set)."""
        entry = self.options_for(ref)
        if entry is not None and entry.choice_continuation is not None:
            return entry.choice_continuation
        return ChoiceContinuation.LETTERS

    def prompt_format_for(self, ref: DatasetRef, task_type: TaskType) -> PromptFormat:
        """How the dataset's prompts reach the model: loglikelihood scoring is always
        plain; else the dataset's setting, the run's, then chat."""
        if (
            task_type is TaskType.MULTIPLE_CHOICE
            and self.choice_scoring_for(ref) is ChoiceScoring.LOGLIKELIHOOD
        ):
            return PromptFormat.PLAIN
        entry = self.options_for(ref)
        if entry is not None and entry.prompt_format is not None:
            return entry.prompt_format
        return self.prompt_format or PromptFormat.CHAT

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "RunSpec":
        params = data.get("params")
        return cls(
            models=tuple(data["models"]),
            datasets=tuple(DatasetRef(d["name"], d["benchmark_version"]) for d in data["datasets"]),
            name=str(data.get("name", "")),
            repeat=int(data.get("repeat", 1)),
            max_concurrency=data.get("max_concurrency"),
            retry_policy=RetryPolicy.from_json(data.get("retry_policy", {})),
            params=None if params is None else GenerationParams.model_validate(params),
            labels=dict(data.get("labels", {})),
            seed=int(data.get("seed", 0)),
            scoring_timeout_s=float(data.get("scoring_timeout_s", 600.0)),
            dataset_options=tuple(
                DatasetOptions.from_json(o) for o in data.get("dataset_options", ())
            ),
            prompt=None if data.get("prompt") is None else PromptOptions.from_json(data["prompt"]),
            choice_scoring=None
            if data.get("choice_scoring") is None
            else ChoiceScoring(data["choice_scoring"]),
            budget=RunBudget.from_json(data.get("budget", {})),
            judge=None if data.get("judge") is None else JudgeSpec.from_json(data["judge"]),
            response_cache=bool(data.get("response_cache", False)),
            reducers=tuple(ReducerSpec.from_json(r) for r in data.get("reducers", ())),
            prompt_format=None
            if data.get("prompt_format") is None
            else PromptFormat(data["prompt_format"]),
            rescore_of=data.get("rescore_of"),
        )

    def body_hash(self) -> str:
        """The hash a ``request_id`` is bound to: same id + different body → conflict."""
        canonical = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def generation_params(data: Mapping[str, Any]) -> GenerationParams:
    """Run-level generation overrides from plain values; bad ones name their field."""
    try:
        return GenerationParams.model_validate(dict(data))
    except ValidationError as exc:
        violations = tuple(
            FieldViolation("params." + ".".join(str(p) for p in e["loc"]), e["msg"])
            for e in exc.errors()
        )
        raise InvalidArgument(
            ErrorReason.RUN_SPEC_INVALID,
            "invalid run spec: " + "; ".join(f"{v.field}: {v.description}" for v in violations),
            field_violations=violations,
        ) from exc


def _dataset_problems(spec: RunSpec) -> list[tuple[str, str]]:
    """The per-dataset settings and run-wide prompt (kept apart from ``_problems``)."""
    datasets = {(d.name, d.benchmark_version) for d in spec.datasets}
    problems = options_problems(spec.dataset_options, datasets)
    if spec.prompt is not None:
        problems.extend(spec.prompt.problems("prompt"))
    if spec.judge is not None:
        problems.extend(spec.judge.problems("judge"))
    if isinstance(spec.repeat, int) and 1 <= spec.repeat <= MAX_REPEAT:
        problems.extend(reducer_problems(spec.reducers, spec.repeat))
    return problems


@dataclass(frozen=True, slots=True)
class ListBound:
    """A bound on one list (or map) of a spec: how many entries, and how many characters
    each string entry may have. Named in the error as ``field``."""

    field: str
    max_items: int
    max_chars: int | None
    entries: Callable[[RunSpec], Collection[Any]]


# Every list a client sends is bounded here, so that a spec stays a few KB when stored
# and hashed (docs/api.md, "Bounds on what a client sends", lists these). A new list
# field of RunSpec gets a row here and there.
LIST_BOUNDS: tuple[ListBound, ...] = (
    ListBound("models", 32, 128, lambda s: s.models),
    ListBound("datasets", MAX_DATASETS, None, lambda s: s.datasets),
    ListBound("retry_policy.backoff_s", 16, None, lambda s: s.retry_policy.backoff_s),
    ListBound("params.stop", 16, 256, lambda s: () if s.params is None else s.params.stop),
    ListBound("labels", MAX_LABELS, None, lambda s: s.labels),  # keys and values: below
    ListBound("dataset_options", MAX_DATASETS, None, lambda s: s.dataset_options),
    ListBound("reducers", MAX_REDUCERS, None, lambda s: s.reducers),
)
_STOP = LIST_BOUNDS[3]  # a dataset's own stop strings are bounded as the run's are


def _bound_problems(spec: RunSpec) -> list[tuple[str, str]]:
    checks: list[tuple[ListBound, str, Collection[Any]]] = [
        (bound, bound.field, bound.entries(spec)) for bound in LIST_BOUNDS
    ]
    checks += [
        (_STOP, f"dataset_options[{i}].{_STOP.field}", entry.params.stop)
        for i, entry in enumerate(spec.dataset_options[:MAX_DATASETS])
        if entry.params is not None
    ]
    problems = []
    for bound, name, entries in checks:
        if len(entries) > bound.max_items:
            problems.append((name, f"at most {bound.max_items} entries, got {len(entries)}"))
            continue
        if bound.max_chars is None:
            continue
        for index, entry in enumerate(entries):
            if isinstance(entry, str) and len(entry) > bound.max_chars:
                problems.append(
                    (
                        f"{name}[{index}]",
                        f"at most {bound.max_chars} characters per entry, got {len(entry)}",
                    )
                )
                break
    return problems


def _problems(spec: RunSpec) -> list[tuple[str, str]]:
    problems = _bound_problems(spec)
    if not spec.models:
        problems.append(("models", "at least one model is required"))
    if len(set(spec.models)) != len(spec.models):
        problems.append(("models", "a model is listed twice"))
    if any(not isinstance(m, str) or not m for m in spec.models):
        problems.append(("models", "model ids must be non-empty strings"))
    if not spec.datasets:
        problems.append(("datasets", "at least one dataset is required"))
    if len(set(spec.datasets)) != len(spec.datasets):
        problems.append(("datasets", "a dataset version is listed twice"))
    for i, ref in enumerate(spec.datasets[:MAX_DATASETS]):
        if not ref.name or not ref.benchmark_version:
            problems.append((f"datasets[{i}]", "name and benchmark_version are required"))
        elif max(len(ref.name), len(ref.benchmark_version)) > MAX_DATASET_REF_CHARS:
            problems.append(
                (
                    f"datasets[{i}]",
                    f"name and benchmark_version: at most {MAX_DATASET_REF_CHARS} characters",
                )
            )
    if isinstance(spec.repeat, bool) or not 1 <= spec.repeat <= MAX_REPEAT:
        problems.append(("repeat", f"must be between 1 and {MAX_REPEAT}"))
    if spec.max_concurrency is not None and (
        isinstance(spec.max_concurrency, bool) or spec.max_concurrency < 1
    ):
        problems.append(("max_concurrency", "must be at least 1 (or unset)"))
    if len(spec.name) > MAX_NAME_CHARS:
        problems.append(("name", f"at most {MAX_NAME_CHARS} characters"))
    if any(not k or len(k) > 63 or len(v) > 256 for k, v in spec.labels.items()):
        problems.append(("labels", "keys 1-63 characters, values at most 256"))
    if not (math.isfinite(spec.scoring_timeout_s) and 1 <= spec.scoring_timeout_s <= 86_400):
        problems.append(("scoring_timeout_s", "must be between 1 and 86400 s"))
    return problems
