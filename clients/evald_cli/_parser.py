"""The ``evald`` command line (argparse: the standard library suffices for these
subcommands, and its usage errors already exit with 2)."""

import argparse
import os

from evald_client import ErrorCategory, RunState, TaskType

DEFAULT_SERVER = "127.0.0.1:50051"
_TASK_TYPES = [t.value for t in TaskType if t is not TaskType.UNSPECIFIED]
_CATEGORIES = [c.value for c in ErrorCategory if c is not ErrorCategory.UNSPECIFIED]


def _connection_options() -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument(
        "--server",
        default=os.environ.get("EVALD_SERVER", DEFAULT_SERVER),
        help="host:port of the evald server (env EVALD_SERVER; default %(default)s)",
    )
    group.add_argument(
        "--token",
        default=os.environ.get("EVALD_TOKEN"),
        help="bearer token (env EVALD_TOKEN)",
    )
    group.add_argument("--tls", action="store_true", help="connect with TLS (system roots)")
    group.add_argument("--ca-cert", metavar="PEM", help="CA bundle for TLS (implies --tls)")
    return parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evald", description="Evaluate language models at scale with an evald server."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    conn = [_connection_options()]

    serve = commands.add_parser("serve", help="run the evald server")
    serve.add_argument("--config", required=True, metavar="FILE", help="the server's TOML file")

    demo = commands.add_parser(
        "demo", help="start a local server with simulated models and run an evaluation live"
    )
    demo.add_argument("--keep", action="store_true", help="keep the temporary directory")
    demo.add_argument(
        "--latency-scale",
        type=float,
        default=1.0,
        help="multiply the simulated latencies (e.g. 0.1 for a quick check)",
    )

    models = commands.add_parser("models", parents=conn, help="list the server's models")
    models.add_argument("--json", action="store_true", help="JSON instead of a table")

    datasets = commands.add_parser("datasets", help="upload and list datasets")
    dataset_commands = datasets.add_subparsers(dest="datasets_command", required=True)
    upload = dataset_commands.add_parser("upload", parents=conn, help="upload a JSONL file")
    upload.add_argument("file", metavar="FILE")
    upload.add_argument("--name", required=True)
    upload.add_argument(
        "--version",
        required=True,
        help="semantic version MAJOR.MINOR.PATCH, e.g. 1.0.0 (1.0 is refused)",
    )
    upload.add_argument("--task-type", required=True, choices=_TASK_TYPES)
    upload.add_argument("--prompt-template", help="template records are rendered with")
    upload.add_argument("--request-id", help="idempotency key")
    listing = dataset_commands.add_parser("list", parents=conn, help="list dataset versions")
    listing.add_argument("--name", help="only the versions of this dataset")
    listing.add_argument("--task-type", choices=_TASK_TYPES)
    listing.add_argument("--json", action="store_true", help="JSON instead of a table")

    runs = commands.add_parser("runs", parents=conn, help="list runs, newest first")
    runs.add_argument(
        "--state",
        action="append",
        choices=[s.value for s in RunState if s.value != "unspecified"],
        help="only runs in this state (repeat for several)",
    )
    runs.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    runs.add_argument("--json", action="store_true", help="JSON instead of a table")

    submit = commands.add_parser("submit", parents=conn, help="submit a run from a spec file")
    submit.add_argument("spec", metavar="SPEC", help="run spec, .toml or .json")
    submit.add_argument("--watch", action="store_true", help="follow the run until it ends")
    submit.add_argument("--request-id", help="idempotency key (overrides the spec's)")

    watch = commands.add_parser(
        "watch", parents=conn, help="live dashboard of a run (exit 1 if it fails)"
    )
    watch.add_argument("run", metavar="RUN")

    results = commands.add_parser("results", parents=conn, help="a run's results")
    results.add_argument("run", metavar="RUN")
    results.add_argument("--json", action="store_true", help="JSON for machines")

    samples = commands.add_parser("samples", parents=conn, help="a run's per-sample rows")
    samples.add_argument("run", metavar="RUN")
    samples.add_argument("--failed", action="store_true", help="only permanently failed ones")
    samples.add_argument("--task", metavar="ID", help="only this task's samples")
    samples.add_argument(
        "--limit", type=_non_negative, default=50, metavar="N", help="at most N (0: all)"
    )
    samples.add_argument("--json", action="store_true", help="JSON for machines")

    cancel = commands.add_parser("cancel", parents=conn, help="cancel a run")
    cancel.add_argument("run", metavar="RUN")

    retry = commands.add_parser("retry", parents=conn, help="re-queue a run's failed samples")
    retry.add_argument("run", metavar="RUN")
    retry.add_argument("--task", action="append", metavar="ID", help="only this task (repeat)")
    retry.add_argument(
        "--category", action="append", choices=_CATEGORIES, help="only this error category"
    )
    return parser


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value
