"""The live view of a run: state folded from watch events, drawn with rich or as lines.

On a terminal: an overall bar with ETA, one row per task (progress, success rate,
latency once scored), one row per model (calls in flight, queued work, the limits it
waits on, a stall, failed calls in a row with the latest error), latency per model and
the latest failures, redrawn in place. Elsewhere (a pipe, a CI log): one plain line
per state change, per tenth of progress, per scored task, per failure (the first
``_MAX_FAILURE_LINES``) and whenever a model starts failing, changes error or stalls.
"""

from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from evald_cli._render import cache_hit_rate, cost_text, is_latency
from evald_client import (
    Cost,
    ModelActivity,
    Progress,
    Run,
    RunEvent,
    RunState,
    SampleFailed,
    StateChanged,
    SubtaskCounts,
    TaskProgress,
    TaskResult,
    TaskScored,
)

_LATEST_FAILURES = 5
_MAX_FAILURE_LINES = 20


@dataclass
class RunView:
    """What the dashboard shows, updated event by event."""

    run_id: str
    name: str
    state: RunState
    counts: SubtaskCounts
    tasks: dict[str, TaskProgress]
    throughput_per_s: float = 0.0
    throughput_known: bool = False
    eta_s: float | None = None
    models: dict[str, ModelActivity] = field(default_factory=dict)
    scored: dict[str, TaskResult] = field(default_factory=dict)
    failures: deque[SampleFailed] = field(default_factory=lambda: deque(maxlen=_LATEST_FAILURES))
    failure_count: int = 0
    cost: Cost | None = None
    cancel_reason: str = ""
    response_cache: bool = False  # the run uses the response cache: show its hit rate

    @classmethod
    def of(cls, run: Run) -> "RunView":
        return cls(
            run_id=run.run_id,
            name=run.spec.name,
            state=run.state,
            counts=run.progress.counts,
            tasks={t.task_id: t for t in run.progress.tasks},
            cost=run.progress.cost,
            cancel_reason=run.cancel_reason,
            response_cache=run.spec.response_cache,
        )

    def apply(self, event: RunEvent) -> None:
        if isinstance(event, StateChanged):
            self.state = event.state
            self.cancel_reason = event.cancel_reason or self.cancel_reason
        elif isinstance(event, Progress):
            self.counts = event.progress.counts
            self.cost = event.progress.cost or self.cost
            self.tasks.update((t.task_id, t) for t in event.progress.tasks)
            self.throughput_per_s = event.throughput_per_s
            self.throughput_known = event.throughput_known
            self.eta_s = event.eta_s
            self.models = {m.model_id: m for m in event.models}
        elif isinstance(event, TaskScored):
            self.scored[event.result.task_id] = event.result
        elif isinstance(event, SampleFailed):
            self.failures.append(event)
            self.failure_count += 1

    @property
    def fraction(self) -> float:
        return self.counts.finished / self.counts.total if self.counts.total else 0.0

    def model_latency(self) -> dict[str, tuple[float, float, int]]:
        """Per model over its scored tasks: sample-weighted mean of the tasks' p50,
        the worst task p99, and the samples they cover (percentiles do not merge
        exactly; this is what the results allow)."""
        by_model: dict[str, list[TaskResult]] = {}
        for result in self.scored.values():
            by_model.setdefault(result.model.model_id, []).append(result)
        latency = {}
        for model_id, results in by_model.items():
            weights = [max(r.execution.samples_succeeded, 1) for r in results]
            p50 = sum(
                w * r.execution.latency_p50_ms for w, r in zip(weights, results, strict=True)
            ) / sum(weights)
            p99 = max(r.execution.latency_p99_ms for r in results)
            latency[model_id] = (p50, p99, sum(r.execution.samples_succeeded for r in results))
        return latency


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = max(0, round(seconds))
    minutes, secs = divmod(seconds, 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _throughput(view: RunView) -> str:
    if not view.throughput_known and not view.state.is_terminal:
        return "rate: estimating"
    return f"{view.throughput_per_s:.1f}/s, ETA {_duration(view.eta_s)}"


def concurrency_text(model: ModelActivity) -> str:
    """The model's concurrency limit: ``12`` fixed, ``12 (AIMD 1–32, 3 episodes)``; with
    several replicas, summed over them: ``12 of 20 on 3 replicas (…, 5 episodes)``."""
    if not model.concurrency_limit:
        return ""
    limit = str(model.concurrency_limit)
    episodes = model.rate_limit_episodes
    if model.replicas > 1:
        limit += f" of {model.replicas_concurrency_limit} on {model.replicas} replicas"
        episodes = model.replicas_rate_limit_episodes
    if not model.adaptive:
        return limit
    return (
        f"{limit} (AIMD {model.concurrency_min}–{model.concurrency_max}, "
        f"{episodes} episode{'s' if episodes != 1 else ''})"
    )


def model_trouble(model: ModelActivity) -> str:
    """What is wrong with a model, in one line; empty when nothing is."""
    parts = []
    if model.stalled_since is not None:
        waiting = ", ".join(model.waiting_on) or "nothing"
        parts.append(f"stalled since {model.stalled_since:%H:%M:%S} (waiting on {waiting})")
    if model.consecutive_failures and model.last_error is not None:
        parts.append(
            f"{model.consecutive_failures} failed call(s) in a row, latest "
            f"{model.last_error.reason}: {model.last_error.message}"
        )
    return "; ".join(parts)


def _rate(counts: SubtaskCounts) -> str:
    rate = counts.success_rate
    return "—" if rate is None else f"{rate:.0%}"


def render(view: RunView) -> RenderableType:
    """The whole dashboard as one rich renderable."""
    counts = view.counts
    head = Text.assemble(
        ("run ", "dim"),
        (view.run_id, "bold"),
        f"  {view.name}  " if view.name else "  ",
        (view.state.value, "bold cyan"),
        ("  ·  ", "dim"),
        f"{counts.finished}/{counts.total} done, {counts.running} running, "
        f"{counts.queued} queued, {counts.failed_permanent} failed, {counts.retrying} retrying",
        ("  ·  ", "dim"),
        _throughput(view),
        *((("  ·  ", "dim"), f"cost {cost_text(view.cost)}") if view.cost else ()),
        *((("  ·  ", "dim"), (view.cancel_reason, "yellow")) if view.cancel_reason else ()),
    )
    overall = Table.grid(padding=(0, 1))
    overall.add_row(
        ProgressBar(total=max(counts.total, 1), completed=counts.finished, width=60),
        f"{view.fraction:.0%}",
    )
    tasks = Table(expand=False, title="tasks", title_justify="left")
    for column in ("model", "dataset", "type", "state", "progress", "done", "ok"):
        tasks.add_column(column)
    tasks.add_column("p50 ms", justify="right")
    tasks.add_column("p99 ms", justify="right")
    if view.response_cache:
        tasks.add_column("cache hits", justify="right")
    for task in view.tasks.values():
        result = view.scored.get(task.task_id)
        total = max(task.counts.total, 1)
        cache = [cache_hit_rate(result.execution) if result else ""]
        tasks.add_row(
            task.model_id,
            str(task.dataset),
            task.task_type.value,
            task.state.value,
            ProgressBar(total=total, completed=task.counts.finished, width=20),
            f"{task.counts.finished}/{task.counts.total}",
            _rate(task.counts),
            f"{result.execution.latency_p50_ms:.0f}" if result else "",
            f"{result.execution.latency_p99_ms:.0f}" if result else "",
            *(cache if view.response_cache else []),
        )
    parts: list[RenderableType] = [head, overall, tasks]
    if view.models and not view.state.is_terminal:
        models_now = Table(title="models", title_justify="left")
        for column in ("model", "running", "queued", "limit", "waiting on", "trouble"):
            models_now.add_column(
                column, justify="right" if column in ("running", "queued") else "left"
            )
        for model in view.models.values():
            trouble = model_trouble(model)
            models_now.add_row(
                model.model_id,
                str(model.in_flight),
                str(model.queued),
                concurrency_text(model),
                ", ".join(model.waiting_on),
                Text(trouble[:120], style="bold red") if trouble else "",
            )
        parts.append(models_now)
    latency = view.model_latency()
    if latency:
        models = Table(title="latency per model (scored tasks)", title_justify="left")
        for column in ("model", "samples", "p50 ms", "p99 ms"):
            models.add_column(column, justify="left" if column == "model" else "right")
        for model_id, (p50, p99, samples) in sorted(latency.items()):
            models.add_row(model_id, str(samples), f"{p50:.0f}", f"{p99:.0f}")
        parts.append(models)
    if view.failures:
        failures = Table(
            title=f"latest failures ({view.failure_count} in all)", title_justify="left"
        )
        for column in ("model", "record", "attempts", "reason", "message"):
            failures.add_column(column)
        for failed in reversed(view.failures):
            failures.add_row(
                failed.model_id,
                failed.record_id,
                str(failed.attempts),
                failed.error.reason,
                failed.error.message[:80],
            )
        parts.append(failures)
    return Group(*parts)


class PlainLines:
    """The dashboard as plain lines, for output that is not a terminal."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._decile = -1
        self._failures_shown = 0
        self._trouble: dict[str, str] = {}  # model id -> the kind of trouble last printed

    def show(self, view: RunView, event: RunEvent) -> None:
        lines = [self._line(view, event)]
        if isinstance(event, Progress):
            lines += self._model_lines(event)
        for line in lines:
            if line:
                self._console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _model_lines(self, event: Progress) -> list[str]:
        """A line when a model starts failing, fails with another reason, or stalls."""
        lines = []
        for model in event.models:
            trouble = model_trouble(model)
            key = _trouble_key(model) if trouble else ""
            if trouble and key != self._trouble.get(model.model_id, ""):
                lines.append(f"model {model.model_id}: {trouble}")
            self._trouble[model.model_id] = key
        return lines

    def _line(self, view: RunView, event: RunEvent) -> str | None:
        if isinstance(event, StateChanged):
            return f"run {view.run_id}: {event.state.value}"
        if isinstance(event, Progress):
            decile = int(view.fraction * 10)
            if decile <= self._decile:
                return None
            self._decile = decile
            c = view.counts
            return (
                f"progress {c.finished}/{c.total} ({view.fraction:.0%}): "
                f"{c.succeeded} ok, {c.failed_permanent} failed, {_throughput(view)}"
            )
        if isinstance(event, TaskScored):
            r = event.result
            metrics = " ".join(
                f"{k}={v:.3f}" for k, v in sorted(r.metrics.items()) if not is_latency(k)
            )
            cache = f" cache hits {cache_hit_rate(r.execution)}" if view.response_cache else ""
            return (
                f"scored {r.model.model_id} on {r.benchmark.name}@{r.benchmark.version}: "
                f"{r.status.value} {metrics}{cache}"
            )
        if isinstance(event, SampleFailed):
            self._failures_shown += 1
            if self._failures_shown > _MAX_FAILURE_LINES:
                return None
            more = (
                " (further failures not shown)"
                if self._failures_shown == _MAX_FAILURE_LINES
                else ""
            )
            return (
                f"failed {event.model_id} record {event.record_id} after {event.attempts} "
                f"attempts: {event.error.reason}: {event.error.message}{more}"
            )
        return None


def _trouble_key(model: ModelActivity) -> str:
    """What makes a model's trouble new: a stall starting, or another error reason."""
    reason = model.last_error.reason if model.consecutive_failures and model.last_error else ""
    return f"{model.stalled_since is not None}|{reason}"


class Dashboard:
    """Shows a run as events arrive: ``with Dashboard(console, run) as board: board.apply(e)``."""

    def __init__(self, console: Console, run: Run) -> None:
        self.view = RunView.of(run)
        self._console = console
        self._live: Live | None = None
        self._plain = None if console.is_terminal else PlainLines(console)

    @contextmanager
    def showing(self) -> Iterator["Dashboard"]:
        if self._plain is not None:
            self._console.print(
                f"watching run {self.view.run_id} ({self.view.counts.total} samples)",
                markup=False,
                highlight=False,
            )
            yield self
            return
        with Live(
            render(self.view), console=self._console, refresh_per_second=4, transient=False
        ) as live:
            self._live = live
            try:
                yield self
            finally:
                live.update(render(self.view))
                self._live = None

    def apply(self, event: RunEvent) -> None:
        self.view.apply(event)
        if self._plain is not None:
            self._plain.show(self.view, event)
        elif self._live is not None:
            self._live.update(render(self.view))
