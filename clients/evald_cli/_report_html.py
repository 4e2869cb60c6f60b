"""The HTML of ``evald report``: one self-contained page (inline CSS and SVG, no script,
no external resource), built from the SDK's typed objects."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape

from evald_cli import _report_svg as svg
from evald_cli._render import is_latency
from evald_client import (
    ClassificationPayload,
    GenerationPayload,
    NerPayload,
    Run,
    RunComparison,
    SummarizationPayload,
    TaskResult,
)

ALPHA = 0.05

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
h3 { margin-bottom: .3rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .3rem .55rem; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, td.text { text-align: left; }
th { background: #f4f6f8; }
.ci { color: #777; font-size: .8rem; }
.worse { color: #c0392b; font-weight: 600; } .better { color: #2e8b57; font-weight: 600; }
.figures { display: flex; flex-wrap: wrap; gap: 1.5rem; align-items: flex-start; }
figure { margin: 0; } figcaption { font-size: .85rem; color: #555; margin-bottom: .3rem; }
.meta { color: #555; font-size: .9rem; }
"""


@dataclass(frozen=True, slots=True)
class ReportData:
    """Everything the page shows, fetched by the command."""

    run: Run
    results: Sequence[TaskResult]
    latencies_ms: Mapping[str, Sequence[float]]  # model id → successful calls' latencies
    failures: Mapping[str, int]  # error reason → permanently failed samples
    comparison: RunComparison | None = None
    generated: datetime = field(default_factory=lambda: datetime.now(UTC))


def _metric_cell(result: TaskResult, name: str) -> str:
    value = result.metrics.get(name)
    if value is None:
        return "<td></td>"
    uncertainty = result.intervals.get(name)
    interval = uncertainty.preferred if uncertainty else None
    ci = (
        f'<br><span class="ci">[{interval.lower:.3f}, {interval.upper:.3f}]</span>'
        if interval
        else ""
    )
    return f"<td>{value:.3f}{ci}</td>"


def _results_table(results: Sequence[TaskResult]) -> str:
    metrics = sorted({m for r in results for m in r.metrics if not is_latency(m)})
    head = "".join(f"<th>{escape(m)}</th>" for m in metrics)
    rows = []
    for r in results:
        profile = r.execution
        rows.append(
            f'<tr><td>{escape(r.model.model_id)}</td><td class="text">'
            f"{escape(r.benchmark.name)}@{escape(r.benchmark.version)}</td>"
            f'<td class="text">{escape(r.status.value)}</td>'
            + "".join(_metric_cell(r, m) for m in metrics)
            + f"<td>{profile.samples_succeeded}/{profile.samples_total}</td>"
            f"<td>{profile.latency_p50_ms:.0f}</td><td>{profile.latency_p99_ms:.0f}</td></tr>"
        )
    return (
        "<table><tr><th>model</th><th>dataset</th><th>status</th>"
        f"{head}<th>ok/total</th><th>p50 ms</th><th>p99 ms</th></tr>{''.join(rows)}</table>"
        '<p class="meta">Beneath each value: its 95 % interval (bootstrap over records, '
        "else Wilson).</p>"
    )


def _breakdown(result: TaskResult) -> list[str]:
    """The figures of one task's payload."""
    name = f"{result.model.model_id} on {result.benchmark.name}@{result.benchmark.version}"
    payload = result.payload
    figures: list[str] = []
    if isinstance(payload, ClassificationPayload):
        matrix = payload.confusion_matrix
        if matrix.labels:
            figures.append(
                _figure(
                    f"confusion matrix — {name} (gold ↓, predicted →)",
                    svg.confusion_matrix(
                        matrix.labels, matrix.rows, matrix.unmapped, title=f"confusion {name}"
                    ),
                )
            )
        items = [svg.Bar(c.label, c.f1, f"support {c.support}") for c in payload.per_class]
        figures.append(_figure(f"F1 per class — {name}", svg.bars(items, title=name, maximum=1.0)))
    elif isinstance(payload, NerPayload):
        items = [svg.Bar(t.entity_type, t.f1, f"support {t.support}") for t in payload.per_type]
        figures.append(
            _figure(f"F1 per entity type — {name}", svg.bars(items, title=name, maximum=1.0))
        )
    elif isinstance(payload, GenerationPayload):
        items = [
            svg.Bar(m.match_mode, m.correct / m.samples if m.samples else 0.0, f"n {m.samples}")
            for m in payload.match_modes
        ]
        figures.append(
            _figure(f"accuracy per match mode — {name}", svg.bars(items, title=name, maximum=1.0))
        )
    elif isinstance(payload, SummarizationPayload):
        items = [svg.Bar(s.rouge_type, s.fmeasure) for s in payload.rouge]
        figures.append(_figure(f"ROUGE F — {name}", svg.bars(items, title=name, maximum=1.0)))
    return figures


def _figure(caption: str, body: str) -> str:
    return f"<figure><figcaption>{escape(caption)}</figcaption>{body}</figure>"


def _p(value: float) -> str:
    return "&lt;0.0001" if value < 1e-4 else f"{value:.4f}"


def _comparison(comparison: RunComparison) -> str:
    rows, forest = [], []
    for task in comparison.tasks:
        pair = (
            task.candidate_model_id
            if task.baseline_model_id == task.candidate_model_id
            else f"{task.baseline_model_id}→{task.candidate_model_id}"
        )
        for m in task.metrics:
            significant = m.p_value < ALPHA
            label = f"{task.dataset_name} {pair} {m.metric}"
            forest.append(
                svg.ForestRow(
                    label, m.delta, m.delta_interval.lower, m.delta_interval.upper, significant
                )
            )
            css = ("better" if m.delta > 0 else "worse") if significant else ""
            rows.append(
                f"<tr><td>{escape(task.dataset_name)}@{escape(task.benchmark_version)}</td>"
                f'<td class="text">{escape(pair)}</td><td class="text">{escape(m.metric)}</td>'
                f"<td>{m.baseline_value:.3f}</td><td>{m.candidate_value:.3f}</td>"
                f'<td class="{css}">{m.delta:+.3f}</td>'
                f"<td>[{m.delta_interval.lower:+.3f}, {m.delta_interval.upper:+.3f}]</td>"
                f'<td>{_p(m.p_value)}</td><td class="text">{escape(m.test.value)}</td>'
                f"<td>{m.records_improved}/{m.records_worsened}/{m.records_unchanged}</td></tr>"
            )
    excluded = "".join(
        f"<li>{escape(t.dataset_name)}@{escape(t.benchmark_version)}: {t.paired_records} "
        f"paired records; {t.baseline_only_records} only in the baseline, "
        f"{t.candidate_only_records} only in the candidate (excluded)</li>"
        for t in comparison.tasks
        if t.baseline_only_records or t.candidate_only_records
    )
    notes = excluded + "".join(
        f"<li>not compared: {escape(u.task_id)} ({escape(u.model_id)} on "
        f"{escape(u.dataset_name)}@{escape(u.benchmark_version)})</li>"
        for u in comparison.unmatched_tasks
    )
    return (
        f"<h2>Against baseline {escape(comparison.baseline_run_id)}</h2>"
        + _figure(
            f"Δ per metric with its {comparison.confidence_level:.0%} paired bootstrap interval "
            f"(coloured when p < {ALPHA})",
            svg.forest_plot(forest, title="deltas against the baseline"),
        )
        + "<table><tr><th>dataset</th><th>models</th><th>metric</th><th>baseline</th>"
        "<th>candidate</th><th>Δ</th><th>95 % CI</th><th>p</th><th>test</th>"
        f"<th>+/−/=</th></tr>{''.join(rows)}</table>" + (f"<ul>{notes}</ul>" if notes else "")
    )


def render_report(data: ReportData) -> str:
    run = data.run
    sections = [
        f"<h1>evald report — {escape(run.spec.name or run.run_id)}</h1>",
        f'<p class="meta">run {escape(run.run_id)} · {escape(run.state.value)} · models '
        f"{escape(', '.join(run.spec.model_ids))} · datasets "
        + escape(", ".join(f"{d.name}@{d.version}" for d in run.spec.datasets))
        + f" · generated {data.generated:%Y-%m-%d %H:%M} UTC</p>",
        "<h2>Results</h2>",
        _results_table(data.results) if data.results else "<p>no results yet</p>",
    ]
    if data.comparison is not None:
        sections.append(_comparison(data.comparison))
    breakdowns = [f for r in data.results for f in _breakdown(r)]
    if breakdowns:
        sections += ["<h2>Breakdowns</h2>", f'<div class="figures">{"".join(breakdowns)}</div>']
    histograms = [
        _figure(
            f"latency — {model}",
            svg.histogram(values, title=f"latency of {model}"),
        )
        for model, values in sorted(data.latencies_ms.items())
    ]
    sections += ["<h2>Latency per model</h2>", f'<div class="figures">{"".join(histograms)}</div>']
    sections.append("<h2>Failures by reason</h2>")
    if data.failures:
        items = [svg.Bar(reason, count) for reason, count in sorted(data.failures.items())]
        sections.append(
            _figure(
                "permanently failed samples", svg.bars(items, title="failures", kind="failures")
            )
        )
    else:
        sections.append("<p>No sample failed permanently.</p>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>evald report {escape(run.run_id)}</title><style>{_CSS}</style></head>"
        f"<body>{''.join(sections)}</body></html>\n"
    )
