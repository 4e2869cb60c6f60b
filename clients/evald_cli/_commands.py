"""The client commands: each takes the parsed arguments and a connected client."""

import argparse
from contextlib import aclosing
from pathlib import Path

import anyio
from rich.console import Console

from evald_cli._compare import deltas_by_task
from evald_cli._dashboard import Dashboard
from evald_cli._errors import CliError, naming_flags
from evald_cli._render import (
    datasets_table,
    models_table,
    results_tables,
    runs_table,
    samples_table,
    to_json,
)
from evald_cli._spec import RunSpecFile, load_spec
from evald_cli._tasks import resolve_tasks, task_label
from evald_client import (
    AsyncEvaldClient,
    DatasetRef,
    ErrorCategory,
    PromptOptions,
    Reducer,
    Run,
    RunState,
    Sample,
    ShotFormat,
    SubtaskState,
    TaskType,
)

# How a watched run ended, as the exit status of `evald submit --watch` / `evald watch`
# (docs/cli.md, "Exit status"): a CI step fails unless the run succeeded.
EXIT_PARTIAL = 3
EXIT_FAILED = 4
EXIT_CANCELLED = 5
_EXIT_BY_STATE = {
    RunState.SUCCEEDED: 0,
    RunState.PARTIAL: EXIT_PARTIAL,
    RunState.FAILED: EXIT_FAILED,
    RunState.CANCELLED: EXIT_CANCELLED,
}
# Runs that have results worth printing when they end.
DEFAULT_SAMPLE_ROWS = 50
# Which flag of `evald datasets upload` sets which field of the upload's header.
_UPLOAD_FLAGS = {
    "header.name": "--name",
    "header.benchmark_version": "--version",
    "header.task_type": "--task-type",
    "header.prompt_template": "--prompt-template",
    "header.request_id": "--request-id",
}


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
    with naming_flags(_UPLOAD_FLAGS):
        dataset = await client.upload_dataset(
            name=args.name,
            version=args.version,
            task_type=TaskType(args.task_type),
            path=path,
            prompt_template=args.prompt_template,
            request_id=args.request_id,
            prompt=upload_prompt(args),
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


def exit_status(state: RunState, *, accept_partial: bool = False) -> int:
    """0 for a succeeded run (and a partial one with ``accept_partial``), else the
    documented status of its end state."""
    if state is RunState.PARTIAL and accept_partial:
        return 0
    return _EXIT_BY_STATE.get(state, 1)


async def _finish(client: AsyncEvaldClient, run: Run, out: Console, *, accept_partial: bool) -> int:
    final = await follow(client, run, out)
    # Failed and cancelled runs too: their results say why (failure reasons).
    for table in results_tables(await client.results(final.run_id)):
        out.print(table)
    out.print(f"run {final.run_id}: {final.state.value}", markup=False, highlight=False)
    return exit_status(final.state, accept_partial=accept_partial)


async def submit(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    spec = load_spec(Path(args.spec))
    # Only --request-id comes from a flag; every other field comes from the spec file.
    flags = {"request_id": "--request-id"} if args.request_id else {}
    with naming_flags(flags):
        run = await _create(client, spec, args.request_id, args.cache)
    # The id alone on the first line, so that scripts can capture it.
    out.print(run.run_id, markup=False, highlight=False)
    if not args.watch:
        return 0
    return await _finish(client, run, out, accept_partial=args.accept_partial)


async def _create(
    client: AsyncEvaldClient,
    spec: RunSpecFile,
    request_id: str | None,
    cache: bool | None = None,
) -> Run:
    return await client.create_run(
        models=spec.models,
        datasets=spec.dataset_refs(),
        name=spec.name,
        max_concurrency=spec.max_concurrency,
        repeat=spec.repeat,
        retry_policy=spec.retry(),
        budget=spec.run_budget(),
        generation=spec.generation_params(),
        labels=spec.labels,
        request_id=request_id or spec.request_id,
        dataset_options=spec.dataset_options(),
        prompt=spec.run_prompt(),
        choice_scoring=spec.choice_scoring,
        prompt_format=spec.prompt_format,
        judge=spec.judge_options(),
        response_cache=spec.response_cache if cache is None else cache,
        reducers=spec.reducers,
    )


async def watch(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    run = await client.get_run(args.run)
    return await _finish(client, run, out, accept_partial=args.accept_partial)


async def results(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    if args.json:
        # The contract's own JSON (what `buf curl` prints), plain: never wrapped or styled.
        print(await client.results_json(args.run))
        return 0
    found = await client.results(args.run)
    deltas = None
    if args.baseline:
        comparison = await client.compare_runs(
            baseline_run_id=args.baseline, candidate_run_id=args.run
        )
        deltas = deltas_by_task(comparison)
    for table in results_tables(found, deltas):
        out.print(table)
    if not found:
        out.print("no results yet", highlight=False)
    return 0


async def samples(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    state = SubtaskState.FAILED_PERMANENT if args.failed else None
    run = await client.get_run(args.run)
    task_id = resolve_tasks(run, [args.task])[0] if args.task else None
    # JSON is for machines: everything unless --limit says otherwise; a table for
    # people stops at 50 rows by default and says how many it left out.
    limit = args.limit if args.limit is not None else (0 if args.json else DEFAULT_SAMPLE_ROWS)
    rows: list[Sample] = []
    more = False
    iterator = client.samples(args.run, task_id=task_id, state=state)
    async with aclosing(iterator) as found:
        async for sample in found:
            if limit and len(rows) >= limit:
                more = True
                break
            rows.append(sample)
    if args.json:
        print(to_json(rows))
        return 0
    out.print(samples_table(rows, {t.task_id: task_label(t) for t in run.progress.tasks}))
    if more:
        counts = next((t.counts for t in run.progress.tasks if t.task_id == task_id), None)
        counts = counts or run.progress.counts
        available = counts.failed_permanent if args.failed else counts.total
        out.print(
            f"{len(rows)} of {available} samples shown; --limit N for more, --limit 0 for all",
            markup=False,
            highlight=False,
        )
    return 0


async def cancel(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    run = await client.cancel_run(args.run)
    out.print(f"run {run.run_id}: {run.state.value}", markup=False, highlight=False)
    return 0


async def retry(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    task_ids = resolve_tasks(await client.get_run(args.run), args.task) if args.task else ()
    try:
        outcome = await client.retry_run(
            args.run,
            task_ids=task_ids,
            categories=[ErrorCategory(c) for c in args.category or ()],
            reasons=args.reason or (),
            states=[SubtaskState(s) for s in args.state or ()],
        )
    except ValueError as exc:  # a --reason the contract does not know
        raise CliError(f"--reason: {exc}") from exc
    out.print(
        f"run {outcome.run.run_id}: {outcome.requeued} samples re-queued, "
        f"{outcome.run.state.value}",
        markup=False,
        highlight=False,
    )
    return 0


async def rescore(client: AsyncEvaldClient, args: argparse.Namespace, out: Console) -> int:
    try:
        reducers = [Reducer.parse(r) for r in args.reducer or ()]
    except ValueError as exc:
        raise CliError(f"--reducer: {exc}") from exc
    # The server names the settings; the user typed them as these flags.
    flags = {"request_id": "--request-id", "settings.choice_scoring": "--choice-scoring"}
    for i, reducer in enumerate(reducers):
        for field in (f"settings.reducers[{i}]", f"settings.reducers[{i}].k"):
            flags[field] = f"--reducer {reducer.name}"
    with naming_flags(flags):
        run = await client.rescore_run(
            args.run,
            reducers=reducers,
            choice_scoring=args.choice_scoring,
            name=args.name,
            request_id=args.request_id,
        )
    # The id alone on the first line, so that scripts can capture it.
    out.print(run.run_id, markup=False, highlight=False)
    if not args.watch:
        return 0
    return await _finish(client, run, out, accept_partial=args.accept_partial)


def upload_prompt(args: argparse.Namespace) -> PromptOptions | None:
    """The upload's prompt options from its flags; None when none was given."""
    shots_from = None
    if args.shots_from:
        name, sep, version = args.shots_from.rpartition("@")
        if not (sep and name and version):
            raise CliError(f"--shots-from: {args.shots_from!r} is not NAME@VERSION")
        shots_from = DatasetRef(name, version)
    options = PromptOptions(
        system_message=args.system_message,
        shots=args.shots,
        shots_from=shots_from,
        shot_seed=args.shot_seed,
        shot_format=ShotFormat(args.shot_format),
    )
    return None if options == PromptOptions() else options
