"""Which task of the baseline run is compared with which task of the candidate run.

Models are paired first, by the first rule that applies:

1. **explicit** — the caller names (baseline model, candidate model) pairs; each model
   at most once per side, each one a model of its run;
2. **model id** — one run's models are all models of the other run (the usual CI
   case: the same model ids, a new dataset or server version; or a subset);
3. **model position** — both specs list as many models: the i-th with the i-th
   (the model role: "the model under test" against "the model under test").

Otherwise the pairing is ambiguous and the caller must name it (INVALID_ARGUMENT).
Within a model pair, tasks match by dataset name and version. A task with no
counterpart is reported as unmatched, never silently dropped.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from evald_server.comparison._types import TaskPairing
from evald_server.domain import ErrorReason, FieldViolation, InvalidArgument


@dataclass(frozen=True, slots=True)
class ModelPair:
    baseline_model_id: str
    candidate_model_id: str


@dataclass(frozen=True, slots=True)
class TaskRef:
    """A task as matching sees it."""

    task_id: str
    model_id: str
    dataset_name: str
    benchmark_version: str


def _invalid(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(
        ErrorReason.INVALID_ARGUMENT,
        message,
        metadata={"field": field},
        field_violations=(FieldViolation(field, message),),
    )


def _explicit(
    pairs: Sequence[ModelPair], baseline_models: Sequence[str], candidate_models: Sequence[str]
) -> dict[str, str]:
    mapping: dict[str, str] = {}
    used: set[str] = set()
    for i, pair in enumerate(pairs):
        field = f"model_pairs[{i}]"
        if pair.baseline_model_id not in baseline_models:
            raise _invalid(
                f"{field}.baseline_model_id",
                f"model {pair.baseline_model_id!r} is not a model of the baseline run",
            )
        if pair.candidate_model_id not in candidate_models:
            raise _invalid(
                f"{field}.candidate_model_id",
                f"model {pair.candidate_model_id!r} is not a model of the candidate run",
            )
        if pair.baseline_model_id in mapping or pair.candidate_model_id in used:
            raise _invalid(field, "each model may appear in at most one pair per run")
        mapping[pair.baseline_model_id] = pair.candidate_model_id
        used.add(pair.candidate_model_id)
    return mapping


def pair_models(
    baseline_models: Sequence[str],
    candidate_models: Sequence[str],
    explicit: Sequence[ModelPair] = (),
) -> tuple[TaskPairing, dict[str, str]]:
    """The pairing rule that applies and baseline model id → candidate model id."""
    if explicit:
        return TaskPairing.EXPLICIT, _explicit(explicit, baseline_models, candidate_models)
    base, cand = set(baseline_models), set(candidate_models)
    if base <= cand or cand <= base:
        return TaskPairing.MODEL_ID, {m: m for m in baseline_models if m in cand}
    if len(baseline_models) == len(candidate_models):
        return TaskPairing.MODEL_POSITION, dict(zip(baseline_models, candidate_models, strict=True))
    raise _invalid(
        "model_pairs",
        f"the baseline's models ({', '.join(baseline_models)}) and the candidate's "
        f"({', '.join(candidate_models)}) cannot be paired by id or position; name the pairs",
    )


def match_tasks(
    baseline: Sequence[TaskRef],
    candidate: Sequence[TaskRef],
    pairing: dict[str, str],
) -> tuple[list[tuple[TaskRef, TaskRef]], list[TaskRef], list[TaskRef]]:
    """(matched pairs in the baseline's order, baseline-only tasks, candidate-only tasks)."""
    by_key = {(t.model_id, t.dataset_name, t.benchmark_version): t for t in candidate}
    matched: list[tuple[TaskRef, TaskRef]] = []
    taken: set[str] = set()
    baseline_only: list[TaskRef] = []
    for task in baseline:
        model = pairing.get(task.model_id)
        other = by_key.get((model, task.dataset_name, task.benchmark_version)) if model else None
        if other is None:
            baseline_only.append(task)
            continue
        matched.append((task, other))
        taken.add(other.task_id)
    candidate_only = [t for t in candidate if t.task_id not in taken]
    return matched, baseline_only, candidate_only
