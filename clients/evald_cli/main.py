"""The ``evald`` command: parse, connect, run one command, report errors in one line.

Exit codes: 0 success; 1 an error (from the server, a bad spec or file); 2 a usage
error; for ``submit --watch`` and ``watch``, how the run ended: 3 partial (0 with
``--accept-partial``), 4 failed, 5 cancelled; 3 ``evald compare`` found a significant
regression; 4 ``evald contract check`` found the server incompatible; 130 interrupted.
"""

import argparse
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import anyio
from rich.console import Console

from evald_cli import _commands
from evald_cli._compare import compare
from evald_cli._errors import CliError
from evald_cli._parser import build_parser
from evald_cli._report import report
from evald_cli._terminal import TerminalConsole, printable
from evald_client import AsyncEvaldClient, EvaldError, TlsConfig

Command = Callable[[AsyncEvaldClient, argparse.Namespace, Console], Awaitable[int]]

_CLIENT_COMMANDS: dict[str, Command] = {
    "models": _commands.models,
    "datasets upload": _commands.datasets_upload,
    "datasets list": _commands.datasets_list,
    "runs": _commands.runs,
    "submit": _commands.submit,
    "watch": _commands.watch,
    "results": _commands.results,
    "samples": _commands.samples,
    "cancel": _commands.cancel,
    "retry": _commands.retry,
    "rescore": _commands.rescore,
    "compare": compare,
    "report": report,
}


def _tls(args: argparse.Namespace) -> bool | TlsConfig:
    if args.ca_cert:
        return TlsConfig.from_files(ca=Path(args.ca_cert))
    return bool(args.tls)


async def _run_client_command(command: Command, args: argparse.Namespace, out: Console) -> int:
    async with AsyncEvaldClient(args.server, token=args.token, tls=_tls(args)) as client:
        return await command(client, args, out)


def _dispatch(args: argparse.Namespace, out: Console) -> int:
    if args.command == "serve":
        from evald_cli._serve import serve

        return serve(Path(args.config))
    if args.command == "demo":
        from evald_cli._demo import demo

        return demo(out, keep=args.keep, latency_scale=args.latency_scale)
    if args.command == "contract":
        from evald_cli._contract import contract_check

        return contract_check(args)
    name = args.command
    if name == "datasets":
        name = f"datasets {args.datasets_command}"
    command = _CLIENT_COMMANDS[name]
    return anyio.run(_run_client_command, command, args, out, backend="asyncio")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2), already printed
        return exc.code if isinstance(exc.code, int) else 2
    # Logs and pipes get a width that fits the tables, unless COLUMNS says otherwise.
    wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    # Server text (model answers, names, messages) is shown, never obeyed: no markup,
    # control characters escaped (evald_cli._terminal).
    out = TerminalConsole(width=120) if wide else TerminalConsole()
    try:
        return _dispatch(args, out)
    except (EvaldError, CliError, OSError) as exc:
        print(f"evald: error: {printable(str(exc), one_line=True)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("evald: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
