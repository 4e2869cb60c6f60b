"""Run spec files (TOML or JSON) for ``evald submit``.

Example (TOML)::

    name = "nightly"
    models = ["sim-large", "sim-small"]
    datasets = [{ name = "sentiment", version = "1.0.0" }, "reading_qa@1.0.0"]
    max_concurrency = 8
    repeat = 1

    [retry_policy]
    max_retries = 2
    backoff_s = [0.5, 2.0]

    [generation]
    temperature = 0.0

    [labels]
    team = "search"
"""

import json
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from evald_cli._errors import CliError
from evald_client import DatasetRef, GenerationParams, RetryPolicy

_NonEmpty = Annotated[str, Field(min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _DatasetEntry(_Strict):
    name: _NonEmpty
    version: _NonEmpty


class _RetryEntry(_Strict):
    max_retries: Annotated[int, Field(ge=0)] | None = None
    backoff_s: list[Annotated[float, Field(ge=0)]] = []
    jitter_fraction: Annotated[float, Field(ge=0, le=1)] | None = None
    retry_after_cap_s: Annotated[float, Field(ge=0)] | None = None


class _GenerationEntry(_Strict):
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: int | None = None
    stop: list[str] = []


def _from_ref(value: object) -> object:
    """``"name@version"`` → ``{"name": …, "version": …}``; anything else unchanged."""
    if not isinstance(value, str):
        return value
    name, sep, version = value.rpartition("@")
    if not (sep and name and version):
        raise ValueError(f"{value!r} is not 'name@version'")
    return {"name": name, "version": version}


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
    generation: _GenerationEntry | None = None
    labels: dict[str, str] = {}
    request_id: str | None = None

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
        )

    def generation_params(self) -> GenerationParams | None:
        entry = self.generation
        if entry is None:
            return None
        return GenerationParams(
            temperature=entry.temperature,
            max_tokens=entry.max_tokens,
            top_p=entry.top_p,
            seed=entry.seed,
            stop=tuple(entry.stop),
        )


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
