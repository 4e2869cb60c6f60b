"""Run spec files (TOML or JSON) for ``evald submit``.

Example (TOML)::

    name = "nightly"
    models = ["sim-large", "sim-small"]
    datasets = [{ name = "sentiment", version = "1.0.0" }, "reading_qa@1.0.0"]
    max_concurrency = 8
    repeat = 1
    choice_scoring = "text"         # multiple-choice datasets: "text" or "logprobs"
    reducers = ["pass@1", "majority"]  # over each record's repeats; pass@k needs k <= repeat
    choice_scoring = "text"         # multiple-choice: "text", "logprobs" or "loglikelihood"
    prompt_format = "chat"          # "chat" (the server's chat template) or "plain"

    [prompt]                        # every dataset of the run (replaces the upload's)
    system_message = "You are a careful expert."

    [retry_policy]
    max_retries = 2
    backoff_s = [0.5, 2.0]
    max_rate_limited_retries = 20   # 429s have their own budget (timeout, transient too)

    [budget]                        # stop the run (CANCELLED) once it has spent this
    max_cost_usd = 5.0
    max_tokens = 2_000_000

    [generation]
    temperature = 0.0

    [labels]
    team = "search"

    response_cache = true           # answer from (and fill) the server's response cache

    [judge]                         # model-graded scoring of every answer
    model = "judge-large"
    rubric = "Is {output} a correct answer to {input}? Reference: {reference}"
    score_format = "scale"          # "pass_fail" (default) or "scale"
    scale = [1, 5]
    pass_threshold = 4
    rounds = 3                      # judge each answer 3 times; agreement is reported
    generation = { temperature = 0.0 }

A dataset entry may carry its own settings, which win over the run's and the models'
(write the datasets as ``[[datasets]]`` tables then)::

    [[datasets]]
    name = "mmlu"
    version = "1.0.0"
    choice_scoring = "logprobs"
    generation = { max_tokens = 1 }
    prompt = { shots = 5, shots_from = "mmlu-dev@1.0.0", shot_format = "chat_turns" }

    [[datasets]]
    name = "arc"
    version = "1.0.0"
    choice_scoring = "loglikelihood"    # lm-eval's method, over /v1/completions
    choice_continuation = "texts"       # " <choice text>" (default "letters": " A")
"""

import json
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from evald_cli._errors import CliError
from evald_client import (
    Budget,
    ChoiceContinuation,
    ChoiceScoring,
    DatasetOptions,
    DatasetRef,
    GenerationParams,
    JudgeOptions,
    JudgeScoreFormat,
    PromptFormat,
    PromptOptions,
    Reducer,
    RetryPolicy,
    ShotFormat,
)

_NonEmpty = Annotated[str, Field(min_length=1)]
_Scoring = Literal["text", "logprobs", "loglikelihood"]
_Format = Literal["chat", "plain"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _from_ref(value: object) -> object:
    """``"name@version"`` → ``{"name": …, "version": …}``; anything else unchanged."""
    if not isinstance(value, str):
        return value
    name, sep, version = value.rpartition("@")
    if not (sep and name and version):
        raise ValueError(f"{value!r} is not 'name@version'")
    return {"name": name, "version": version}


def _reducer(value: object) -> object:
    """``"pass@5"`` (``pass^K``, ``majority``, ``mean``) → a ``Reducer``."""
    return Reducer.parse(value) if isinstance(value, str) else value


class _RefEntry(_Strict):
    name: _NonEmpty
    version: _NonEmpty


class _PromptEntry(_Strict):
    system_message: str | None = None
    shots: Annotated[int, Field(ge=0)] = 0
    shots_from: Annotated[_RefEntry, BeforeValidator(_from_ref)] | None = None
    shot_seed: int = 0
    shot_format: Literal["single_message", "chat_turns"] = "single_message"

    def options(self) -> PromptOptions:
        source = self.shots_from
        return PromptOptions(
            system_message=self.system_message,
            shots=self.shots,
            shots_from=None if source is None else DatasetRef(source.name, source.version),
            shot_seed=self.shot_seed,
            shot_format=ShotFormat(self.shot_format),
        )


class _RetryEntry(_Strict):
    max_retries: Annotated[int, Field(ge=0)] | None = None
    backoff_s: list[Annotated[float, Field(ge=0)]] = []
    jitter_fraction: Annotated[float, Field(ge=0, le=1)] | None = None
    retry_after_cap_s: Annotated[float, Field(ge=0)] | None = None
    # Budgets of their own per error class; the classes without one share max_retries.
    max_rate_limited_retries: Annotated[int, Field(ge=0, le=100)] | None = None
    max_timeout_retries: Annotated[int, Field(ge=0, le=100)] | None = None
    max_transient_retries: Annotated[int, Field(ge=0, le=100)] | None = None


class _BudgetEntry(_Strict):
    max_cost_usd: Annotated[float, Field(gt=0)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None


class _GenerationEntry(_Strict):
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: int | None = None
    stop: list[str] = []

    def params(self) -> GenerationParams:
        return GenerationParams(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            top_p=self.top_p,
            seed=self.seed,
            stop=tuple(self.stop),
        )


class _JudgeEntry(_Strict):
    model: _NonEmpty
    rubric: str = ""  # empty: the server's default rubric
    score_format: Literal["pass_fail", "scale"] = "pass_fail"
    scale: Annotated[list[int], Field(min_length=2, max_length=2)] | None = None
    pass_threshold: int | None = None
    rounds: Annotated[int, Field(ge=1)] = 1
    parse_retries: Annotated[int, Field(ge=0)] | None = None
    generation: _GenerationEntry | None = None

    def options(self) -> JudgeOptions:
        low, high = self.scale or (0, 0)
        return JudgeOptions(
            model_id=self.model,
            rubric=self.rubric,
            score_format=JudgeScoreFormat(self.score_format),
            scale_min=low,
            scale_max=high,
            pass_threshold=self.pass_threshold,
            rounds=self.rounds,
            parse_retries=self.parse_retries,
            generation=None if self.generation is None else self.generation.params(),
        )


class _DatasetEntry(_RefEntry):
    generation: _GenerationEntry | None = None
    prompt: _PromptEntry | None = None
    choice_scoring: _Scoring | None = None
    choice_continuation: Literal["letters", "texts"] | None = None
    prompt_format: _Format | None = None

    @property
    def has_settings(self) -> bool:
        settings = (
            self.generation,
            self.prompt,
            self.choice_scoring,
            self.choice_continuation,
            self.prompt_format,
        )
        return any(value is not None for value in settings)


class RunSpecFile(_Strict):
    """A validated run spec; ``datasets`` entries are tables or ``"name@version"``."""

    name: str = ""
    models: Annotated[list[_NonEmpty], Field(min_length=1)]
    datasets: Annotated[
        list[Annotated[_DatasetEntry, BeforeValidator(_from_ref)]], Field(min_length=1)
    ]
    max_concurrency: Annotated[int, Field(ge=1)] | None = None
    repeat: Annotated[int, Field(ge=1)] = 1
    retry_policy: _RetryEntry | None = None
    budget: _BudgetEntry | None = None
    generation: _GenerationEntry | None = None
    labels: dict[str, str] = {}
    request_id: str | None = None
    prompt: _PromptEntry | None = None
    choice_scoring: _Scoring | None = None
    prompt_format: _Format | None = None
    judge: _JudgeEntry | None = None
    response_cache: bool = False
    reducers: list[Annotated[Reducer, BeforeValidator(_reducer)]] = []

    def judge_options(self) -> JudgeOptions | None:
        return None if self.judge is None else self.judge.options()

    def dataset_refs(self) -> list[DatasetRef]:
        return [DatasetRef(entry.name, entry.version) for entry in self.datasets]

    def retry(self) -> RetryPolicy | None:
        entry = self.retry_policy
        if entry is None:
            return None
        return RetryPolicy(
            max_retries=entry.max_retries,
            backoff_s=tuple(entry.backoff_s),
            jitter_fraction=entry.jitter_fraction,
            retry_after_cap_s=entry.retry_after_cap_s,
            max_rate_limited_retries=entry.max_rate_limited_retries,
            max_timeout_retries=entry.max_timeout_retries,
            max_transient_retries=entry.max_transient_retries,
        )

    def run_budget(self) -> Budget | None:
        entry = self.budget
        if entry is None:
            return None
        return Budget(max_cost_usd=entry.max_cost_usd, max_tokens=entry.max_tokens)

    def generation_params(self) -> GenerationParams | None:
        return None if self.generation is None else self.generation.params()

    def run_prompt(self) -> PromptOptions | None:
        return None if self.prompt is None else self.prompt.options()

    def dataset_options(self) -> list[DatasetOptions]:
        """The per-dataset settings of the entries that have any."""
        return [
            DatasetOptions(
                dataset=DatasetRef(entry.name, entry.version),
                generation=None if entry.generation is None else entry.generation.params(),
                prompt=None if entry.prompt is None else entry.prompt.options(),
                choice_scoring=None
                if entry.choice_scoring is None
                else ChoiceScoring(entry.choice_scoring),
                choice_continuation=None
                if entry.choice_continuation is None
                else ChoiceContinuation(entry.choice_continuation),
                prompt_format=None
                if entry.prompt_format is None
                else PromptFormat(entry.prompt_format),
            )
            for entry in self.datasets
            if entry.has_settings
        ]


def load_spec(path: Path) -> RunSpecFile:
    """Read and validate a spec file; ``CliError`` names the file and the bad key."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise CliError(f"{path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: cannot read: {exc}") from exc
    data = _parse(path, text)
    if not isinstance(data, dict):
        raise CliError(f"{path}: a run spec is a table/object, not {type(data).__name__}")
    try:
        return RunSpecFile.model_validate(data)
    except ValidationError as exc:
        raise CliError(f"{path}: {_describe(exc)}") from exc


def _parse(path: Path, text: str) -> Any:
    suffix = path.suffix.lower()
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CliError(f"{path}: invalid TOML: {exc}") from exc
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise CliError(f"{path}: invalid JSON: {exc}") from exc
    raise CliError(f"{path}: unknown spec format {suffix or '(none)'!r}; use .toml or .json")


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        location = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
        ).lstrip(".")
        parts.append(f"{location or 'spec'}: {error['msg']}")
    return "; ".join(parts)
