"""Tables for people (rich) and JSON for machines, from the SDK's typed objects."""

import dataclasses
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any

from rich.table import Table
from rich.text import Text

from evald_client import Dataset, Model, ResultStatus, Run, Sample, TaskResult

_STATUS_STYLE = {
    ResultStatus.SUCCESS: "green",
    ResultStatus.PARTIAL_SUCCESS: "yellow",
    ResultStatus.FAILED: "red",
    ResultStatus.CANCELLED: "dim",
}


def jsonable(value: Any) -> Any:
    """Plain JSON data from the SDK's dataclasses, enums, datetimes and mappings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        data = {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if type(value).__name__.endswith("Payload"):
            data = {"kind": type(value).__name__.removesuffix("Payload").lower(), **data}
        return data
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def to_json(value: Any) -> str:
    return json.dumps(jsonable(value), indent=2, ensure_ascii=False)


def models_table(models: Iterable[Model]) -> Table:
    table = Table(title="models")
    for column in ("id", "provider", "provider model", "max concurrency", "timeout s", "stream"):
        table.add_column(column)
    for m in models:
        timeout = "" if m.timeout_s is None else f"{m.timeout_s:g}"
        table.add_row(
            m.model_id,
            m.provider,
            m.provider_model,
            str(m.max_concurrency),
            timeout,
            "yes" if m.streaming else "no",
        )
    return table


def datasets_table(datasets: Iterable[Dataset]) -> Table:
    table = Table(title="datasets")
    for column in ("name", "version", "task type", "records", "sha256", "id", "created"):
        table.add_column(column)
    for d in datasets:
        created = d.created_time.strftime("%Y-%m-%d %H:%M") if d.created_time else ""
        table.add_row(
            d.name,
            d.version,
            d.task_type.value,
            str(d.record_count),
            d.content_sha256[:12],
            d.dataset_id,
            created,
        )
    return table


def runs_table(runs: Iterable[Run]) -> Table:
    table = Table(title="runs")
    for column in ("run", "name", "state", "done", "failed", "models", "datasets", "created"):
        table.add_column(column)
    for run in runs:
        counts = run.progress.counts
        done = counts.succeeded + counts.failed_permanent + counts.cancelled
        table.add_row(
            run.run_id,
            run.spec.name,
            run.state.value,
            f"{done}/{counts.total}",
            str(counts.failed_permanent),
            ", ".join(run.spec.model_ids),
            ", ".join(f"{d.name}@{d.version}" for d in run.spec.datasets),
            run.created_time.strftime("%Y-%m-%d %H:%M") if run.created_time else "",
        )
    return table


def is_latency(metric: str) -> bool:
    """Latency metrics, shown from the execution profile rather than among the scores."""
    return "latency" in metric or metric.endswith("_ms")


def _metric_cell(result: TaskResult, name: str) -> Text:
    value = result.metrics.get(name)
    if value is None:
        return Text("")
    text = Text(f"{value:.3f}")
    uncertainty = result.intervals.get(name)
    interval = uncertainty.preferred if uncertainty else None
    if interval is not None:
        text.append(f"\n{interval.lower:.2f}–{interval.upper:.2f}", style="dim")
    return text


def results_tables(results: Iterable[TaskResult]) -> list[Table]:
    """One table per dataset version, one row per model, one column per score (with its
    95 % interval beneath), then samples and latency."""
    by_benchmark: dict[tuple[str, str], list[TaskResult]] = {}
    for result in results:
        key = (result.benchmark.name, result.benchmark.version)
        by_benchmark.setdefault(key, []).append(result)
    tables = []
    for (name, version), group in by_benchmark.items():
        metrics = sorted({m for r in group for m in r.metrics if not is_latency(m)})
        table = Table(title=f"{name}@{version} ({group[0].task_type.value})", title_justify="left")
        table.add_column("model")
        table.add_column("status")
        for metric in metrics:
            table.add_column(metric, justify="right")
        for column in ("ok/total", "p50 ms", "p99 ms"):
            table.add_column(column, justify="right")
        reasons = any(r.errors for r in group)
        if reasons:  # why a task failed or is partial, where the result says
            table.add_column("failure reasons")
        for r in group:
            profile = r.execution
            table.add_row(
                r.model.model_id,
                Text(r.status.value, style=_STATUS_STYLE.get(r.status, "")),
                *(_metric_cell(r, metric) for metric in metrics),
                f"{profile.samples_succeeded}/{profile.samples_total}",
                f"{profile.latency_p50_ms:.0f}",
                f"{profile.latency_p99_ms:.0f}",
                *([failure_reasons(r)] if reasons else []),
            )
        tables.append(table)
    return tables


def failure_reasons(result: TaskResult) -> str:
    """The result's errors, one per line: reason and message."""
    return "\n".join(_clip(f"{e.reason}: {e.message}", 100) for e in result.errors)


def _clip(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def samples_table(samples: Iterable[Sample]) -> Table:
    table = Table(title="samples")
    for column in ("task", "model", "record", "state", "output", "expected", "scores", "error"):
        table.add_column(column)
    for s in samples:
        scores = " ".join(f"{k}={v:.2f}" for k, v in sorted(s.scores.items()))
        error = f"{s.last_error.reason}: {s.last_error.message}" if s.last_error else ""
        table.add_row(
            s.task_id,
            s.model_id,
            s.record_id if not s.repeat_index else f"{s.record_id}#{s.repeat_index}",
            s.state.value,
            _clip(s.output, 40),
            _clip(s.expected, 30),
            scores,
            _clip(error, 60),
        )
    return table
