"""The models a task calls, as CreateRun froze them: the hand-off from the application
to the engine.

The application writes them with each task when the run is created (the effective
generation parameters and the price then, so a later config change neither re-prompts
nor reprices a run); the engine reads them back to build the task's call contexts, its
provenance and its cost. Stored as the answering model's identity, with the judge's
under ``"judge"`` — the shape every stored task already has.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evald_server.engine._results import ModelIdentity

_JUDGE = "judge"


@dataclass(frozen=True, slots=True)
class TaskModels:
    """The answering model of a task and, for a judged run, its judge."""

    answer: ModelIdentity
    judge: ModelIdentity | None = None

    @property
    def model_ids(self) -> tuple[str, ...]:
        """The models the task calls: its own, then its judge's."""
        if self.judge is None:
            return (self.answer.model_id,)
        return (self.answer.model_id, self.judge.model_id)

    def to_json(self) -> dict[str, Any]:
        data = self.answer.to_json()
        if self.judge is not None:
            data[_JUDGE] = self.judge.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "TaskModels":
        judge = data.get(_JUDGE)
        return cls(
            answer=ModelIdentity.from_json(data),
            judge=None if judge is None else ModelIdentity.from_json(judge),
        )
