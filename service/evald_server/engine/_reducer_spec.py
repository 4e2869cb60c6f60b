"""The reducers over repeats a run asks for (``RunSpec.reducers``), checked on their own
and against the run's repeat and its datasets' task types.

A reducer is a kind (``scoring.Reducer``: pass@k, pass^k, majority, mean) and, for
pass@k and pass^k, a k with 1 <= k <= repeat: a k above the repeats would need samples
the run never draws (pass@n reported as pass@k is the pitfall this check refuses).
Each task of the run reports each reducer over its records
(``TaskEvaluation.reduced``).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evald_server.domain import TaskType
from evald_server.scoring import Reducer, correctness_of

MAX_REDUCERS = 16
_WITH_K = (Reducer.PASS_AT_K, Reducer.PASS_HAT_K)


@dataclass(frozen=True, slots=True)
class ReducerSpec:
    """One reducer of a run: its kind, and k for pass@k and pass^k (else None)."""

    kind: Reducer
    k: int | None = None

    @property
    def name(self) -> str:
        """The metric's name: ``pass@5``, ``pass^3``, ``majority``, ``mean``."""
        return self.kind.value if self.k is None else self.kind.value.replace("k", str(self.k))

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.value} | ({} if self.k is None else {"k": self.k})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ReducerSpec":
        k = data.get("k")
        return cls(Reducer(data["kind"]), None if k is None else int(k))

    def asked(self) -> tuple[Reducer, int | None]:
        return self.kind, self.k


def reducer_problems(reducers: Sequence[ReducerSpec], repeat: int) -> list[tuple[str, str]]:
    """(field, what is wrong) for each bad entry of ``reducers``, named ``reducers[i]``."""
    problems: list[tuple[str, str]] = []
    if len(reducers) > MAX_REDUCERS:
        return []  # the spec's list bounds name it (LIST_BOUNDS)
    seen: set[str] = set()
    for i, reducer in enumerate(reducers):
        field = f"reducers[{i}]"
        if not isinstance(reducer.kind, Reducer):
            problems.append((f"{field}.kind", "must be set"))
            continue
        k = reducer.k
        if reducer.kind in _WITH_K:
            if k is None:
                problems.append((f"{field}.k", f"{reducer.kind.value} needs k (1 to repeat)"))
                continue
            if isinstance(k, bool) or k < 1:
                problems.append((f"{field}.k", f"must be at least 1, got {k}"))
                continue
            if k > repeat:
                problems.append(
                    (
                        f"{field}.k",
                        f"k = {k} is more than the run's repeat ({repeat}): {reducer.kind.value} "
                        "needs at least k samples of each record",
                    )
                )
                continue
        elif k is not None:
            problems.append((f"{field}.k", f"{reducer.kind.value} takes no k, got {k}"))
            continue
        if reducer.name in seen:
            problems.append((field, f"{reducer.name} is listed twice"))
        seen.add(reducer.name)
    return problems


def task_type_problems(
    reducers: Sequence[ReducerSpec], datasets: Iterable[tuple[str, TaskType]]
) -> list[tuple[str, str]]:
    """(field, what is wrong) for reducers a dataset's task type cannot give: any
    reducer needs a per-sample correct bool, majority also an answer key per sample."""
    problems: list[tuple[str, str]] = []
    datasets = list(datasets)
    for i, reducer in enumerate(reducers):
        for label, task_type in datasets:
            given = correctness_of(task_type)
            if not given.correct:
                problems.append(
                    (
                        f"reducers[{i}]",
                        f"{reducer.name} needs a per-sample correct answer; {label} is "
                        f"{task_type.value}, which has none",
                    )
                )
                break
            if reducer.kind is Reducer.MAJORITY and not given.answers:
                problems.append(
                    (
                        f"reducers[{i}]",
                        f"majority needs an answer key per sample; {label} is "
                        f"{task_type.value}, whose scorer gives none",
                    )
                )
                break
    return problems
