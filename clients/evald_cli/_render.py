"""Tables for people (rich) and JSON for machines, from the SDK's typed objects."""

import dataclasses
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any

from rich.table import Table
from rich.text import Text

from evald_client import (
    CodePayload,
    Cost,
    Dataset,
    ExecutionProfile,
    FinishReason,
    MetricComparison,
    Model,
    ResultStatus,
    Run,
    Sample,
    SubtaskState,
    TaskResult,
)

# candidate task id → metric → its comparison with the baseline (``results --baseline``).
Deltas = Mapping[str, Mapping[str, MetricComparison]]

JUDGE_COVERAGE = "judge_coverage"  # judged / answered: shown as counts, under ok/total
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


def _metric_cell(result: TaskResult, name: str, deltas: Deltas) -> Text:
    value = result.metrics.get(name)
    if value is None:
        return Text("")
    text = Text(f"{value:.3f}")
    uncertainty = result.intervals.get(name)
    interval = uncertainty.preferred if uncertainty else None
    if interval is not None:
        text.append(f"\n{interval.lower:.2f}–{interval.upper:.2f}", style="dim")
    change = deltas.get(result.task_id, {}).get(name)
    if change is not None:
        style = "dim" if change.p_value >= 0.05 else "green" if change.delta > 0 else "red"
        mark = "" if change.p_value >= 0.05 else "*"
        text.append(f"\nΔ {change.delta:+.3f}{mark}", style=style)
    return text


def _reduced_cell(result: TaskResult, name: str) -> Text:
    """A reducer's value, its interval beneath, and the records it left out."""
    metric = next((m for m in result.reduced if m.name == name), None)
    if metric is None:
        return Text("")
    text = Text(f"{metric.value:.3f}")
    text.append(f"\n{metric.interval.lower:.2f}–{metric.interval.upper:.2f}", style="dim")
    if metric.records_skipped:
        text.append(f"\n{metric.records_skipped} skipped", style="yellow")
    return text


def results_tables(results: Iterable[TaskResult], deltas: Deltas | None = None) -> list[Table]:
    """One table per dataset version, one row per model, one column per score (with its
    95 % interval beneath and, given ``deltas``, the change against a baseline run:
    ``*`` when significant at 0.05), then samples and latency."""
    by_benchmark: dict[tuple[str, str], list[TaskResult]] = {}
    for result in results:
        key = (result.benchmark.name, result.benchmark.version)
        by_benchmark.setdefault(key, []).append(result)
    tables = []
    for (name, version), group in by_benchmark.items():
        metrics = sorted({m for r in group for m in r.metrics if not _with_the_counts(m)})
        title = f"{name}@{version} ({group[0].task_type.value})"
        source = group[0].provenance.rescored_from_run_id
        if source:  # RescoreRun: these answers were scored again, not asked for again
            title += f", rescored from {source}"
        table = Table(title=title, title_justify="left")
        table.add_column("model")
        table.add_column("status")
        for metric in metrics:
            table.add_column(metric, justify="right")
        # The run's reducers over repeats (pass@5, majority …), in the order asked.
        reduced = list(dict.fromkeys(m.name for r in group for m in r.reduced))
        for name in reduced:
            table.add_column(name, justify="right")
        for column in ("ok/total", "cut/empty", "p50 ms", "p99 ms"):
            table.add_column(column, justify="right")
        # Cost where something was spent (a price, or tokens counted): the column is
        # noise for runs answered by the simulator or wholly from the cache.
        costed = any(_spent(r.execution.cost) for r in group)
        if costed:
            table.add_column("cost", justify="right")
        cached = any(r.execution.cache_hits for r in group)
        if cached:  # runs with the response cache: how many answers came from it
            table.add_column("cache hits", justify="right")
        reasons = any(r.errors for r in group)
        if reasons:  # why a task failed or is partial, where the result says
            table.add_column("failure reasons")
        code = any(isinstance(r.payload, CodePayload) for r in group)
        if code:  # code tasks: how the programs fared in the sandbox
            table.add_column("verdicts")
        for r in group:
            profile = r.execution
            # Latency is measured on answered calls: none answered, none to show.
            measured = profile.samples_succeeded > 0
            table.add_row(
                r.model.model_id,
                Text(r.status.value, style=_STATUS_STYLE.get(r.status, "")),
                *(_metric_cell(r, metric, deltas or {}) for metric in metrics),
                *(_reduced_cell(r, name) for name in reduced),
                _answered(r),
                _cut_and_empty(profile.samples_truncated, profile.samples_empty),
                f"{profile.latency_p50_ms:.0f}" if measured else "",
                f"{profile.latency_p99_ms:.0f}" if measured else "",
                *([cost_text(profile.cost)] if costed else []),
                *([cache_hit_rate(profile)] if cached else []),
                *([failure_reasons(r)] if reasons else []),
                *([code_verdicts(r.payload)] if code else []),
            )
        tables.append(table)
    return tables


_VERDICT_STYLE = {"passed": "green", "failed": "red", "error": "red"}


def code_verdicts(payload: object) -> Text:
    """A code task's samples per verdict, those that occurred: "passed 6 failed 2"."""
    text = Text()
    if not isinstance(payload, CodePayload):
        return text
    for count in payload.verdicts:
        if count.samples:
            if text:
                text.append("\n")
            text.append(
                f"{count.verdict} {count.samples}",
                style=_VERDICT_STYLE.get(count.verdict, "yellow"),
            )
    return text


def _with_the_counts(metric: str) -> bool:
    """Figures shown with the counts and latencies rather than among the scores."""
    return is_latency(metric) or metric == JUDGE_COVERAGE


def _answered(result: TaskResult) -> Text:
    """Answers succeeded of all; beneath, for a judged task whose judge could not grade
    every answer, how many it did (``judge_coverage`` as counts, highlighted)."""
    profile = result.execution
    text = Text(f"{profile.samples_succeeded}/{profile.samples_total}")
    judge = result.provenance.judge
    if judge is not None and judge.unjudged_samples:
        answered = judge.judged_samples + judge.unjudged_samples
        text.append(f"\njudged {judge.judged_samples}/{answered}", style="yellow")
    return text


def _spent(cost: Cost | None) -> bool:
    return cost is not None and (cost.priced or cost.tokens > 0)


def cost_text(cost: Cost | None) -> str:
    """``$0.0123``, ``~$0.0123`` when token counts were estimated, ``12,000 tok`` when no
    price is configured; empty when the server does not report cost."""
    if cost is None:
        return ""
    mark = "~" if cost.estimated else ""
    if not cost.priced:
        return f"{mark}{cost.tokens:,} tok"
    return f"{mark}${cost.cost_usd:.4f}"


def cache_hit_rate(profile: ExecutionProfile) -> str:
    """Answers served from the response cache, of the succeeded ones: "9/12 (75%)"."""
    done = profile.samples_succeeded
    if done == 0:
        return "0/0"
    return f"{profile.cache_hits}/{done} ({profile.cache_hits / done:.0%})"


def _cut_and_empty(truncated: int, empty: int) -> Text:
    """Answers cut by max_tokens and empty answers: highlighted, since either skews scores."""
    return Text(f"{truncated}/{empty}", style="yellow" if truncated or empty else "")


def failure_reasons(result: TaskResult) -> str:
    """The result's errors, one per line: reason and message."""
    return "\n".join(_clip(f"{e.reason}: {e.message}", 100) for e in result.errors)


def _clip(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _sample_error(sample: Sample) -> Text:
    """The last error of a failed sample; for one that succeeded after retries, that it
    was retried (its last error is history, not its outcome)."""
    error = sample.last_error
    if error is None:
        return Text("")
    if sample.state is SubtaskState.SUCCEEDED:
        return Text(
            _clip(f"retried, then ok: {sample.attempts} attempts, last {error.reason}"), style="dim"
        )
    return Text(_clip(f"{error.reason}: {error.message}", 60))


def samples_table(samples: Iterable[Sample], task_labels: Mapping[str, str]) -> Table:
    """One row per sample (a judge call's record says so); ``task_labels`` names each
    task as ``--task`` accepts it."""
    table = Table(title="samples")
    columns = ("task", "record", "state", "output", "stop", "expected", "scores", "error")
    for column in columns:
        # What --task and --failed users copy stays whole; free text wraps.
        table.add_column(column, no_wrap=column in ("task", "record", "state", "stop"))
    for s in samples:
        scores = " ".join(f"{k}={v:.2f}" for k, v in sorted(s.scores.items()))
        if s.execution is not None:  # a code sample: how its program fared in the sandbox
            scores += f"\n{s.execution.verdict}: {_clip(s.execution.reason, 40)}".rstrip(": ")
        state = s.state.value
        if s.state is SubtaskState.SUCCEEDED and s.last_error is not None:
            state += " (retried)"
        record = s.record_id if not s.repeat_index else f"{s.record_id}#{s.repeat_index}"
        if s.judge_round is not None:  # a judge call grading that record's answer
            record += f" (judge round {s.judge_round})"
        table.add_row(
            task_labels.get(s.task_id, s.task_id),
            record,
            state,
            _clip(s.output, 40),
            "" if s.finish_reason is FinishReason.UNSPECIFIED else s.finish_reason.value,
            _clip(s.expected, 30),
            scores,
            _sample_error(s),
        )
    return table
