"""``evald compare BASE CANDIDATE``: a comparison table, and a gate a CI job can trust.

The gate: ``--fail-if-drop METRIC=THRESHOLD`` (repeatable) names the metrics that must
not regress. A task *regresses* on METRIC when the candidate's value is lower than the
baseline's by more than THRESHOLD (``-delta > THRESHOLD``, in the metric's own unit:
0.01 is one accuracy point) **and** the drop is significant: the paired test's p-value
is below ``--alpha`` (default 0.05). A large drop on a handful of records, or a tiny
significant one, does not fail the job. Exit codes: 0 no regression, 3 at least one
regression (listed), 1 an error (including a gated metric that no compared task has),
2 a usage error.
"""

import argparse
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evald_cli._errors import CliError
from evald_cli._render import jsonable
from evald_client import (
    AsyncEvaldClient,
    MetricComparison,
    ModelPair,
    RunComparison,
    TaskComparison,
)

EXIT_REGRESSION = 3
DEFAULT_ALPHA = 0.05


def drop_threshold(text: str) -> tuple[str, float]:
    """``accuracy=0.01`` → ("accuracy", 0.01) (argparse type of ``--fail-if-drop``)."""
    metric, sep, value = text.partition("=")
    try:
        threshold = float(value)
    except ValueError:
        threshold = math.nan
    if not sep or not metric.strip() or not math.isfinite(threshold) or threshold < 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not METRIC=THRESHOLD with a threshold >= 0, e.g. accuracy=0.01"
        )
    return metric.strip(), threshold


def model_pair(text: str) -> ModelPair:
    """``base-model=candidate-model`` (argparse type of ``--pair``)."""
    base, sep, cand = text.partition("=")
    if not sep or not base or not cand:
        raise argparse.ArgumentTypeError(f"{text!r} is not BASELINE_MODEL=CANDIDATE_MODEL")
    return ModelPair(base, cand)


def alpha_level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a level between 0 and 1")
    return value


@dataclass(frozen=True, slots=True)
class Regression:
    task: TaskComparison
    metric: MetricComparison
    threshold: float


def regressions(
    comparison: RunComparison, thresholds: Mapping[str, float], alpha: float
) -> list[Regression]:
    """Every (task, metric) that drops by more than its threshold, significantly."""
    present = {m.metric for t in comparison.tasks for m in t.metrics}
    missing = sorted(set(thresholds) - present)
    if missing:
        raise CliError(
            f"--fail-if-drop names {', '.join(missing)}, which no compared task has "
            f"(compared: {', '.join(sorted(present)) or 'nothing'})"
        )
    found = []
    for task in comparison.tasks:
        for metric in task.metrics:
            threshold = thresholds.get(metric.metric)
            if threshold is None:
                continue
            if -metric.delta > threshold and metric.p_value < alpha:
                found.append(Regression(task, metric, threshold))
    return found


def _verdict(metric: MetricComparison, thresholds: Mapping[str, float], alpha: float) -> Text:
    threshold = thresholds.get(metric.metric)
    significant = metric.p_value < alpha
    if threshold is not None and -metric.delta > threshold and significant:
        return Text("REGRESSION", style="bold red")
    if not significant:
        return Text("not significant", style="dim")
    return Text(
        "better" if metric.delta > 0 else "worse", style="green" if metric.delta > 0 else "yellow"
    )


def _p(value: float) -> str:
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def comparison_tables(
    comparison: RunComparison, thresholds: Mapping[str, float], alpha: float
) -> list[Table]:
    """One table per matched task, one row per headline metric."""
    level = round(comparison.confidence_level * 100)
    tables = []
    for task in comparison.tasks:
        models = (
            task.baseline_model_id
            if task.baseline_model_id == task.candidate_model_id
            else f"{task.baseline_model_id} → {task.candidate_model_id}"
        )
        table = Table(
            title=f"{task.dataset_name}@{task.benchmark_version}  {models}  "
            f"({task.paired_records} paired records, {task.paired_samples} samples)",
            title_justify="left",
        )
        table.add_column("metric", no_wrap=True)
        for column in ("baseline", "candidate", "Δ", f"{level} % CI of Δ", "p"):
            table.add_column(column, justify="right", no_wrap=True)
        for column in ("test", "+/−/=", "verdict"):
            table.add_column(column, no_wrap=True)
        if not task.metrics:
            table.add_row("—", *[""] * 7, Text("nothing paired", style="red"))
        for metric in task.metrics:
            interval = metric.delta_interval
            table.add_row(
                metric.metric,
                f"{metric.baseline_value:.3f}",
                f"{metric.candidate_value:.3f}",
                f"{metric.delta:+.3f}",
                f"[{interval.lower:+.3f}, {interval.upper:+.3f}]",
                _p(metric.p_value),
                metric.test.value,
                f"{metric.records_improved}/{metric.records_worsened}/{metric.records_unchanged}",
                _verdict(metric, thresholds, alpha),
            )
        tables.append(table)
    return tables


def _notes(comparison: RunComparison) -> Iterable[str]:
    for task in comparison.tasks:
        if task.baseline_only_records or task.candidate_only_records:
            yield (
                f"{task.dataset_name}@{task.benchmark_version}: "
                f"{task.baseline_only_records} records only in the baseline, "
                f"{task.candidate_only_records} only in the candidate (excluded)"
            )
    for unmatched in comparison.unmatched_tasks:
        side = "baseline" if unmatched.run_id == comparison.baseline_run_id else "candidate"
        yield (
            f"not compared: {side} task {unmatched.task_id} ({unmatched.model_id} on "
            f"{unmatched.dataset_name}@{unmatched.benchmark_version}) has no counterpart"
        )


async def compare(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    thresholds = dict(args.fail_if_drop or ())
    comparison = await client.compare_runs(
        baseline_run_id=args.baseline,
        candidate_run_id=args.candidate,
        model_pairs=args.pair or (),
        seed=args.seed,
    )
    found = regressions(comparison, thresholds, args.alpha)
    if args.json:
        document = {
            "comparison": jsonable(comparison),
            "gate": {"alpha": args.alpha, "fail_if_drop": thresholds},
            "regressions": [
                {
                    "task": r.task.candidate_task_id,
                    "dataset": r.task.dataset_name,
                    "metric": r.metric.metric,
                    "delta": r.metric.delta,
                    "p_value": r.metric.p_value,
                    "threshold": r.threshold,
                }
                for r in found
            ],
        }
        print(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        out.print(
            f"candidate {comparison.candidate_run_id} vs baseline {comparison.baseline_run_id}: "
            f"Δ = candidate − baseline on the paired samples; CI = paired bootstrap over "
            f"records; +/−/= records improved/worsened/unchanged; alpha {args.alpha:g}",
            highlight=False,
        )
        for table in comparison_tables(comparison, thresholds, args.alpha):
            out.print(table)
        for note in _notes(comparison):
            out.print(note, highlight=False)
        for r in found:
            out.print(
                f"REGRESSION {r.task.dataset_name}@{r.task.benchmark_version} "
                f"{r.task.candidate_model_id} {r.metric.metric}: {r.metric.delta:+.4f} "
                f"(threshold −{r.threshold:g}, p = {_p(r.metric.p_value)} < {args.alpha:g})",
                style="bold red",
                highlight=False,
            )
    return EXIT_REGRESSION if found else 0


def deltas_by_task(comparison: RunComparison) -> dict[str, dict[str, MetricComparison]]:
    """candidate task id → metric → comparison (for ``evald results --baseline``)."""
    return {t.candidate_task_id: {m.metric: m for m in t.metrics} for t in comparison.tasks}
