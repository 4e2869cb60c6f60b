"""``evald report RUN [--baseline RUN] -o report.html``: fetch a run's results, its
samples (latencies; failure reasons of the answers and the judge calls that failed) and
optionally its comparison with a baseline, and write one self-contained HTML file."""

import argparse
from collections import Counter
from contextlib import aclosing

import anyio
from rich.console import Console

from evald_cli._report_html import ReportData, render_report
from evald_client import AsyncEvaldClient, SubtaskState


async def report(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    run = await client.get_run(args.run)
    results = await client.results(args.run)
    latencies: dict[str, list[float]] = {model: [] for model in run.spec.model_ids}
    failures: Counter[str] = Counter()
    async with aclosing(client.samples(args.run, page_size=1000)) as samples:
        async for sample in samples:
            if sample.latency_ms is not None:
                latencies.setdefault(sample.model_id, []).append(sample.latency_ms)
    # Listed by state: the failed judge calls too (a judged task's answers succeed).
    failed = client.samples(args.run, state=SubtaskState.FAILED_PERMANENT, page_size=1000)
    async with aclosing(failed) as samples:
        async for sample in samples:
            error = sample.last_error
            reason = error.reason if error else "UNKNOWN"
            failures[reason if sample.judge_round is None else f"judge: {reason}"] += 1
    comparison = None
    if args.baseline:
        comparison = await client.compare_runs(
            baseline_run_id=args.baseline, candidate_run_id=args.run
        )
    html = render_report(ReportData(run, results, latencies, dict(failures), comparison))
    path = anyio.Path(args.output)
    await path.write_text(html, encoding="utf-8")
    out.print(f"wrote {path} ({len(html.encode()) // 1024} KiB)", highlight=False)
    return 0
