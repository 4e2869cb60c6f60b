"""Per-dataset settings of a run: generation parameters, prompt options, choice scoring
(and its continuations), the prompt format.

Precedence, field by field for generation parameters: the model's defaults, then the
run's ``params``, then the dataset's. Prompt options, choice scoring and the prompt
format are replaced whole: the dataset's entry in the run, else the run's, else (prompt)
what the dataset was uploaded with. Loglikelihood scoring is always the plain format.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evald_server.config import GenerationParams
from evald_server.datasets import PromptOptions
from evald_server.domain import ChoiceContinuation, ChoiceScoring, PromptFormat


@dataclass(frozen=True, slots=True)
class DatasetOptions:
    """The settings of one dataset of a run (by name and version)."""

    name: str
    benchmark_version: str
    params: GenerationParams | None = None
    prompt: PromptOptions | None = None
    choice_scoring: ChoiceScoring | None = None
    choice_continuation: ChoiceContinuation | None = None  # loglikelihood: letters or texts
    prompt_format: PromptFormat | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "benchmark_version": self.benchmark_version}
        if self.params is not None:
            data["params"] = self.params.model_dump(mode="json", exclude_unset=True)
        if self.prompt is not None:
            data["prompt"] = self.prompt.to_json()
        if self.choice_scoring is not None:
            data["choice_scoring"] = self.choice_scoring.value
        if self.choice_continuation is not None:
            data["choice_continuation"] = self.choice_continuation.value
        if self.prompt_format is not None:
            data["prompt_format"] = self.prompt_format.value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "DatasetOptions":
        params, prompt, scoring = data.get("params"), data.get("prompt"), data.get("choice_scoring")
        return cls(
            name=str(data["name"]),
            benchmark_version=str(data["benchmark_version"]),
            params=None if params is None else GenerationParams.model_validate(params),
            prompt=None if prompt is None else PromptOptions.from_json(prompt),
            choice_scoring=None if scoring is None else ChoiceScoring(scoring),
            choice_continuation=None
            if data.get("choice_continuation") is None
            else ChoiceContinuation(data["choice_continuation"]),
            prompt_format=None
            if data.get("prompt_format") is None
            else PromptFormat(data["prompt_format"]),
        )


def options_problems(
    options: tuple[DatasetOptions, ...], datasets: set[tuple[str, str]]
) -> list[tuple[str, str]]:
    """(field, what is wrong) for entries naming no dataset of the run, or one twice."""
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for i, entry in enumerate(options):
        key = (entry.name, entry.benchmark_version)
        if key not in datasets:
            problems.append(
                (
                    f"dataset_options[{i}].dataset",
                    f"{entry.name} {entry.benchmark_version} is not one of the run's datasets",
                )
            )
        elif key in seen:
            problems.append((f"dataset_options[{i}].dataset", "a dataset has one entry at most"))
        seen.add(key)
        if entry.prompt is not None:
            problems.extend(entry.prompt.problems(f"dataset_options[{i}].prompt"))
    return problems
