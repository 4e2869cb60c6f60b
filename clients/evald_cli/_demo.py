"""``evald demo``: a whole evaluation on this machine in about a minute.

It writes a config with three simulated models (accurate and slow, middling, sloppy
and fast) and a fresh SQLite file into a temporary directory, starts ``evald serve``
as a child process on a free loopback port, uploads the bundled sample datasets,
runs every model on every dataset with the live dashboard, prints the results and
stops the server (SIGTERM, then SIGKILL after a bound), leaving nothing running.

The code dataset runs its answers' programs in the server's sandbox: where bubblewrap
is installed and the demo runs as root, the config enables ``[sandbox]``; otherwise,
or when the server refuses the code dataset (SANDBOX_UNAVAILABLE, its message naming
what is missing), the demo says so and runs the other datasets.
"""

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import anyio
from rich.console import Console
from rich.text import Text

from evald_cli._commands import follow
from evald_cli._errors import CliError
from evald_cli._render import results_tables
from evald_cli._serve import READY_PREFIX
from evald_client import (
    AsyncEvaldClient,
    DatasetRef,
    EvaldError,
    RetryPolicy,
    Run,
    TaskType,
)

_STARTUP_TIMEOUT_S = 60.0
_RUN_TIMEOUT_S = 300.0  # the demo run takes ~20 s; past this something is wrong
_STOP_TIMEOUT_S = 20.0
_POLL_S = 0.05
_VERSION = "1.0.0"

# The bundled datasets (sample_data/README.md) and their task types.
SAMPLE_DATASETS: dict[str, TaskType] = {
    "sentiment.jsonl": TaskType.CLASSIFICATION,
    "reading_qa.jsonl": TaskType.QA,
    "news_ner.jsonl": TaskType.NER,
    "local_news_summaries.jsonl": TaskType.SUMMARIZATION,
    "arithmetic_generation.jsonl": TaskType.GENERATION,
    "general_knowledge_mc.jsonl": TaskType.MULTIPLE_CHOICE,
    "python_functions.jsonl": TaskType.CODE,
}
SANDBOX_UNAVAILABLE = "SANDBOX_UNAVAILABLE"


@dataclass(frozen=True)
class SimulatedModel:
    model_id: str
    accuracy: float
    latency_ms: float
    fault_rate: float


DEMO_MODELS = (
    SimulatedModel("sim-large", accuracy=0.9, latency_ms=300.0, fault_rate=0.0),
    SimulatedModel("sim-medium", accuracy=0.7, latency_ms=120.0, fault_rate=0.02),
    SimulatedModel("sim-small", accuracy=0.5, latency_ms=40.0, fault_rate=0.05),
)


def sandbox_possible() -> str | None:
    """Why this machine cannot run the code sandbox, or None (the server checks the
    rest when the run is created)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (make bubblewrap)"
    if os.geteuid() != 0:
        return "the sandbox needs the server to run as root (a uid per slot)"
    return None


def demo_config(workdir: Path, *, latency_scale: float = 1.0, sandbox: bool = False) -> str:
    """The server config of the demo (TOML), with its SQLite file in ``workdir``;
    ``sandbox``: the code sandbox enabled (2 slots)."""
    lines = [
        "[server]",
        'listen = "127.0.0.1:0"',
        "grace_s = 2.0",
        "",
        "[store]",
        f'url = "sqlite:///{(workdir / "evald.sqlite3").as_posix()}"',
    ]
    if sandbox:
        bwrap = shutil.which("bwrap") or "/usr/bin/bwrap"
        lines += ["", "[sandbox]", "enabled = true", "slots = 2", f'bwrap = "{bwrap}"']
    for index, model in enumerate(DEMO_MODELS):
        lines += [
            "",
            "[[models]]",
            f'id = "{model.model_id}"',
            'provider = "simulated"',
            # Two calls at a time keep the run on screen for a while.
            "max_concurrency = 2",
            "",
            "[models.simulator]",
            f"accuracy = {model.accuracy}",
            f"latency_ms_median = {model.latency_ms * latency_scale}",
            f"fault_rate = {model.fault_rate}",
            f"seed = {index + 1}",
        ]
    return "\n".join(lines) + "\n"


def sample_data_dir() -> Path:
    return Path(str(resources.files("evald_cli").joinpath("sample_data")))


@asynccontextmanager
async def running_server(config: Path, workdir: Path) -> AsyncIterator[str]:
    """Run ``evald serve --config config`` as a child; yield its address; stop it.

    Its stdout goes to a file whose first line announces the address (no pipe left
    for the child to block on); its log goes to ``server.log``.
    """
    out_path, log_path = workdir / "server.out", workdir / "server.log"
    command = [sys.executable, "-m", "evald_cli", "serve", "--config", str(config)]
    with out_path.open("wb") as out, log_path.open("wb") as log:
        # Its own session: a Ctrl-C at the terminal reaches the demo, which stops it.
        process = subprocess.Popen(  # noqa: ASYNC220 (returns at once; waits are polled)
            command, stdout=out, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
        )
    try:
        yield await _wait_ready(process, out_path, log_path)
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)


async def _wait_ready(process: subprocess.Popen[bytes], out: Path, log: Path) -> str:
    with anyio.move_on_after(_STARTUP_TIMEOUT_S):
        while True:
            first = (await anyio.Path(out).read_text(errors="replace")).partition("\n")
            if first[1] and first[0].startswith(READY_PREFIX):
                return first[0].removeprefix(READY_PREFIX).strip()
            if process.poll() is not None:
                raise CliError(
                    f"the server exited with {process.returncode} before it was ready: {_tail(log)}"
                )
            await anyio.sleep(_POLL_S)
    raise CliError(f"the server was not ready after {_STARTUP_TIMEOUT_S:.0f} s: {_tail(log)}")


async def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        await anyio.to_thread.run_sync(functools.partial(process.wait, timeout=_STOP_TIMEOUT_S))
    except subprocess.TimeoutExpired:
        process.kill()
        await anyio.to_thread.run_sync(process.wait)


def _tail(log: Path, lines: int = 5) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no server log)"
    return " | ".join(text[-lines:]) or "(empty server log)"


async def _demo(out: Console, workdir: Path, latency_scale: float) -> int:
    config = workdir / "evald.toml"
    no_sandbox = sandbox_possible()
    config.write_text(
        demo_config(workdir, latency_scale=latency_scale, sandbox=no_sandbox is None),
        encoding="utf-8",
    )
    out.print(f"demo directory {workdir}", style="dim")
    if no_sandbox is not None:
        out.print(f"the code dataset is left out: {no_sandbox}", style="yellow", highlight=False)
    async with running_server(config, workdir) as address:
        out.print(Text.assemble("server listening on ", (address, "bold")))
        async with AsyncEvaldClient(address) as client:
            refs = []
            code: list[DatasetRef] = []
            for filename, task_type in SAMPLE_DATASETS.items():
                if task_type is TaskType.CODE and no_sandbox is not None:
                    continue
                dataset = await client.upload_dataset(
                    name=filename.removesuffix(".jsonl"),
                    version=_VERSION,
                    task_type=task_type,
                    path=sample_data_dir() / filename,
                )
                refs.append(DatasetRef(dataset.name, dataset.version))
                if task_type is TaskType.CODE:
                    code.append(refs[-1])
                out.print(
                    f"uploaded {dataset.name}@{dataset.version} "
                    f"({task_type.value}, {dataset.record_count} records)",
                    highlight=False,
                )
            models = [m.model_id for m in await client.list_models()]
            try:
                run = await _create(client, models, refs)
            except EvaldError as exc:
                if exc.reason != SANDBOX_UNAVAILABLE or not code:
                    raise
                out.print(f"the code dataset is left out: {exc.message}", style="yellow")
                refs = [ref for ref in refs if ref not in code]
                run = await _create(client, models, refs)
            out.print(
                Text.assemble(
                    "run ", (run.run_id, "bold"), f": {len(models)} models × {len(refs)} datasets"
                )
            )
            final = None
            with anyio.move_on_after(_RUN_TIMEOUT_S):
                final = await follow(client, run, out)
            if final is None:
                await client.cancel_run(run.run_id)
                raise CliError(
                    f"run {run.run_id} did not finish in {_RUN_TIMEOUT_S:.0f} s; cancelled it"
                )
            for table in results_tables(await client.results(final.run_id)):
                out.print(table)
            out.print(f"run {final.run_id}: {final.state.value}", highlight=False)
    out.print("server stopped")
    return 0


async def _create(client: AsyncEvaldClient, models: list[str], refs: list[DatasetRef]) -> Run:
    return await client.create_run(
        models=models,
        datasets=refs,
        name="evald demo",
        # Simulated faults are transient: retry them quickly, not after minutes.
        retry_policy=RetryPolicy(max_retries=2, backoff_s=(0.2, 0.5)),
        labels={"source": "evald demo"},
    )


async def _until_signal(out: Console, workdir: Path, latency_scale: float) -> int:
    """The demo, cancelled (and so cleaned up: the server is stopped) on SIGINT, SIGTERM
    or SIGHUP; returns 128 + the signal's number then."""
    received: list[int] = []
    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as got:
                async for signum in got:
                    received.append(signum)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        code = await _demo(out, workdir, latency_scale)
        tg.cancel_scope.cancel()
    if received:
        out.print(f"interrupted by {signal.Signals(received[0]).name}; server stopped")
        return 128 + received[0]
    return code


def demo(out: Console, *, keep: bool = False, latency_scale: float = 1.0) -> int:
    if latency_scale <= 0:
        raise CliError(f"--latency-scale must be > 0, not {latency_scale}")
    workdir = Path(tempfile.mkdtemp(prefix="evald-demo-"))
    try:
        return anyio.run(_until_signal, out, workdir, latency_scale, backend="asyncio")
    finally:
        if keep:
            out.print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
