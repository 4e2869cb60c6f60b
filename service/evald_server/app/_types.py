"""The application's objects: what the gRPC servicer converts to and from proto."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from evald_server.config import GenerationParams, ModelConfig
from evald_server.datasets import ChatPrompt, PromptOptions, expected_text, prompt_text
from evald_server.domain import Cost, EvalError, RetryCounts, RunState, SubtaskState, TaskType
from evald_server.engine import AnswerJudgement, RunProgress, RunSpec
from evald_server.store import DatasetRow, RunRow, SubtaskRow, TaskRow

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a listing; ``next_page_token`` is empty on the last page."""

    items: tuple[T, ...]
    next_page_token: str


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """A registry entry as clients see it: no base URL, no key, no key variable."""

    model_id: str
    provider: str
    provider_model: str
    max_concurrency: int
    timeout_s: float
    default_params: GenerationParams
    streaming: bool

    @classmethod
    def of(cls, model: ModelConfig) -> "ModelInfo":
        return cls(
            model_id=model.id,
            provider=model.provider,
            provider_model=model.provider_model,
            max_concurrency=model.max_concurrency,
            timeout_s=model.timeout_s,
            default_params=model.params,
            streaming=model.stream,
        )


@dataclass(frozen=True, slots=True)
class DatasetHeader:
    """The first message of an upload."""

    name: str
    benchmark_version: str
    task_type: TaskType
    prompt_template: str | None = None
    request_id: str | None = None
    prompt: PromptOptions | None = None  # system message, k-shot examples


@dataclass(frozen=True, slots=True)
class Dataset:
    dataset_id: str
    name: str
    benchmark_version: str
    task_type: TaskType
    record_count: int
    content_sha256: str
    prompt_template: str | None
    created_at: float
    size_bytes: int
    prompt: PromptOptions | None = None

    @classmethod
    def of(cls, row: DatasetRow) -> "Dataset":
        return cls(
            dataset_id=row.dataset_id,
            name=row.name,
            benchmark_version=row.benchmark_version,
            task_type=row.task_type,
            record_count=row.record_count,
            content_sha256=row.content_sha256,
            prompt_template=row.prompt_template,
            created_at=row.created_at,
            size_bytes=row.size_bytes,
            prompt=None
            if row.prompt_options is None
            else PromptOptions.from_json(row.prompt_options),
        )


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    spec: RunSpec
    state: RunState
    cancel_requested: bool
    progress: RunProgress
    created_at: float
    started_at: float | None
    finished_at: float | None
    last_seq: int
    request_id: str | None
    cancel_reason: str | None = None  # why the server cancelled it (a budget)

    @classmethod
    def of(
        cls,
        row: RunRow,
        tasks: Sequence[TaskRow],
        *,
        now: float,
        calls: Mapping[str, int] | None = None,
    ) -> "Run":
        """``calls``: provider calls in flight per task (the engine's live count)."""
        return cls(
            run_id=row.run_id,
            spec=RunSpec.from_json(row.spec),
            state=row.state,
            cancel_requested=row.cancel_requested,
            progress=RunProgress.of(row, tasks, now=now, calls=calls),
            created_at=row.created_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            last_seq=row.last_seq,
            request_id=row.request_id,
            cancel_reason=row.cancel_reason,
        )


@dataclass(frozen=True, slots=True)
class Sample:
    """One subtask as ListSamples shows it."""

    subtask_id: str
    run_id: str
    task_id: str
    model_id: str
    record_id: str
    repeat_index: int
    state: SubtaskState
    input: str
    expected: str
    output: str | None
    scores: Mapping[str, float]
    flags: tuple[str, ...]
    correct: bool | None
    attempts: int  # provider requests made for it, retries included
    latency_ms: float | None
    ttft_ms: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    first_error: EvalError | None
    last_error: EvalError | None
    finished_at: float | None
    finish_reason: str | None = None  # stop / length / content_filter / tool_calls / unknown
    # Text fields ListSamples cut to fit its page: name → full size in bytes.
    truncated: Mapping[str, int] = field(default_factory=dict)
    failures: RetryCounts = field(default_factory=RetryCounts)  # per class, since queued
    cost: Cost | None = None  # of the successful call
    judgement: AnswerJudgement | None = None  # a judged task's verdict, once scored
    cache_hit: bool = False  # answered from the response cache (no provider call)
    # A code task's sample: its program's run in the sandbox, as stored (docs/SANDBOX.md).
    execution: Mapping[str, Any] | None = None

    @property
    def usage_reported(self) -> bool:
        return self.prompt_tokens is not None or self.completion_tokens is not None

    @property
    def decode_tokens_per_second(self) -> float | None:
        """completion tokens / (latency − TTFT) of a streamed call that reported usage."""
        if self.completion_tokens is None or self.latency_ms is None or self.ttft_ms is None:
            return None
        decode_ms = self.latency_ms - self.ttft_ms
        return self.completion_tokens / (decode_ms / 1000.0) if decode_ms > 0 else None

    @classmethod
    def of(cls, row: SubtaskRow, task_type: TaskType, prompt: ChatPrompt) -> "Sample":
        return cls(
            subtask_id=row.subtask_id,
            run_id=row.run_id,
            task_id=row.task_id,
            model_id=row.model_id,
            record_id=row.record_id,
            repeat_index=row.repeat_index,
            state=row.state,
            input=prompt_text(prompt.render(row.fields, row.record_id)),
            expected=expected_text(task_type, row.fields),
            output=row.output,
            scores=row.scores or {},
            flags=row.answer_flags + row.flags,
            correct=row.correct,
            attempts=row.requests,
            latency_ms=None if row.latency_s is None else row.latency_s * 1000.0,
            ttft_ms=None if row.ttft_s is None else row.ttft_s * 1000.0,
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            first_error=row.first_error,
            last_error=row.last_error,
            finished_at=row.updated_at if row.state.is_terminal else None,
            finish_reason=row.finish_reason,
            failures=row.failures,
            cost=row.cost,
            judgement=None if row.judgement is None else AnswerJudgement.from_json(row.judgement),
            cache_hit=row.cache_hit,
            execution=row.execution,
        )
