"""The client commands: each takes the parsed arguments and a connected client."""

import argparse
from contextlib import aclosing
from pathlib import Path

import anyio
from rich.console import Console

from evald_cli._dashboard import Dashboard
from evald_cli._errors import CliError
from evald_cli._render import (
    datasets_table,
    models_table,
    results_tables,
    runs_table,
    samples_table,
    to_json,
)
from evald_cli._spec import load_spec
from evald_client import (
    AsyncEvaldClient,
    ErrorCategory,
    Run,
    RunState,
    Sample,
    SubtaskState,
    TaskType,
)

# A watched run that ends in one of these exits 0; failed or cancelled runs exit 1.
_GOOD_END = frozenset({RunState.SUCCEEDED, RunState.PARTIAL})


async def models(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    found = await client.list_models()
    if args.json:
        out.print_json(to_json(found))
    else:
        out.print(models_table(found))
    return 0


async def runs(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    states = [RunState(s) for s in args.state or ()]
    found: list[Run] = []
    async with aclosing(client.list_runs(states=states)) as pages:
        async for run in pages:
            found.append(run)
            if len(found) >= args.limit:
                break
    if args.json:
        out.print_json(to_json(found))
    else:
        out.print(runs_table(found))
    return 0


async def datasets_upload(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    path = Path(args.file)
    if not await anyio.Path(path).is_file():
        raise CliError(f"{path}: no such file")
    dataset = await client.upload_dataset(
        name=args.name,
        version=args.version,
        task_type=TaskType(args.task_type),
        path=path,
        prompt_template=args.prompt_template,
        request_id=args.request_id,
    )
    out.print(
        f"uploaded {dataset.name}@{dataset.version}: {dataset.task_type.value}, "
        f"{dataset.record_count} records, sha256 {dataset.content_sha256[:12]}, "
        f"id {dataset.dataset_id}",
        markup=False,
        highlight=False,
    )
    return 0


async def datasets_list(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    task_type = TaskType(args.task_type) if args.task_type else None
    async with aclosing(client.list_datasets(name=args.name, task_type=task_type)) as pages:
        found = [dataset async for dataset in pages]
    if args.json:
        out.print_json(to_json(found))
    else:
        out.print(datasets_table(found))
    return 0


async def follow(client: AsyncEvaldClient, run: Run, out: Console) -> Run:
    """Show the run's dashboard until it is terminal; return it then."""
    dashboard = Dashboard(out, run)
    with dashboard.showing():
        async with aclosing(client.watch(run.run_id)) as events:
            async for event in events:
                dashboard.apply(event)
    return await client.get_run(run.run_id)


async def _finish(client: AsyncEvaldClient, run: Run, out: Console) -> int:
    final = await follow(client, run, out)
    # Failed and cancelled runs too: their results say why (failure reasons).
    for table in results_tables(await client.results(final.run_id)):
        out.print(table)
    out.print(f"run {final.run_id}: {final.state.value}", markup=False, highlight=False)
    return 0 if final.state in _GOOD_END else 1


async def submit(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    spec = load_spec(Path(args.spec))
    run = await client.create_run(
        models=spec.models,
        datasets=spec.dataset_refs(),
        name=spec.name,
        max_concurrency=spec.max_concurrency,
        repeat=spec.repeat,
        retry_policy=spec.retry(),
        generation=spec.generation_params(),
        labels=spec.labels,
        request_id=args.request_id or spec.request_id,
    )
    # The id alone on the first line, so that scripts can capture it.
    out.print(run.run_id, markup=False, highlight=False)
    if not args.watch:
        return 0
    return await _finish(client, run, out)


async def watch(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    return await _finish(client, await client.get_run(args.run), out)


async def results(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    found = await client.results(args.run)
    if args.json:
        # Plain print: machine output must not be wrapped or styled.
        print(to_json(found))
    else:
        for table in results_tables(found):
            out.print(table)
        if not found:
            out.print("no results yet", highlight=False)
    return 0


async def samples(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    state = SubtaskState.FAILED_PERMANENT if args.failed else None
    rows: list[Sample] = []
    iterator = client.samples(args.run, task_id=args.task, state=state)
    async with aclosing(iterator) as found:
        async for sample in found:
            if args.limit and len(rows) >= args.limit:
                break
            rows.append(sample)
    if args.json:
        print(to_json(rows))
    else:
        out.print(samples_table(rows))
    return 0


async def cancel(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    run = await client.cancel_run(args.run)
    out.print(f"run {run.run_id}: {run.state.value}", markup=False, highlight=False)
    return 0


async def retry(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    outcome = await client.retry_run(
        args.run,
        task_ids=args.task or (),
        categories=[ErrorCategory(c) for c in args.category or ()],
    )
    out.print(
        f"run {outcome.run.run_id}: {outcome.requeued} samples re-queued, "
        f"{outcome.run.state.value}",
        markup=False,
        highlight=False,
    )
    return 0
