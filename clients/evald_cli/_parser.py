"""The ``evald`` command line (argparse: the standard library suffices for these
subcommands, and its usage errors already exit with 2)."""

import argparse
import os

from evald_cli._compare import DEFAULT_ALPHA, alpha_level, drop_threshold, model_pair
from evald_cli._reflection import MAX_BYTES, MAX_FILES, TIMEOUT_S
from evald_client import ErrorCategory, RunState, SubtaskState, TaskType

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
    upload.add_argument("--system-message", help="system message sent before every record")
    upload.add_argument("--shots", type=int, default=0, help="solved examples before each record")
    upload.add_argument(
        "--shots-from", metavar="NAME@VERSION", help="draw the examples from this dataset version"
    )
    upload.add_argument("--shot-seed", type=int, default=0, help="seed of the example draw")
    upload.add_argument(
        "--shot-format",
        choices=["single_message", "chat_turns"],
        default="single_message",
        help="examples in one user message, or as user/assistant turns",
    )
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
    submit.add_argument(
        "--watch",
        action="store_true",
        help="follow the run until it ends; exit 0 succeeded, 3 partial, 4 failed, 5 cancelled",
    )
    submit.add_argument("--request-id", help="idempotency key (overrides the spec's)")
    submit.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="answer from (and fill) the server's response cache; overrides the spec's "
        "response_cache",
    )
    _accept_partial(submit)

    watch = commands.add_parser(
        "watch",
        parents=conn,
        help="live dashboard of a run; exit 0 succeeded, 3 partial, 4 failed, 5 cancelled",
    )
    watch.add_argument("run", metavar="RUN")
    _accept_partial(watch)

    results = commands.add_parser("results", parents=conn, help="a run's results")
    results.add_argument("run", metavar="RUN")
    results.add_argument("--json", action="store_true", help="JSON for machines")
    results.add_argument(
        "--baseline", metavar="RUN", help="show each metric's change against this run inline"
    )

    compare = commands.add_parser(
        "compare",
        parents=conn,
        help="compare a candidate run with a baseline run (exit 3 on a significant regression)",
    )
    compare.add_argument("baseline", metavar="BASE")
    compare.add_argument("candidate", metavar="CANDIDATE")
    compare.add_argument(
        "--fail-if-drop",
        action="append",
        type=drop_threshold,
        metavar="METRIC=THRESHOLD",
        help="exit 3 when METRIC drops by more than THRESHOLD and the drop is significant",
    )
    compare.add_argument(
        "--alpha",
        type=alpha_level,
        default=DEFAULT_ALPHA,
        help="significance level of the gate (default %(default)s)",
    )
    compare.add_argument(
        "--pair",
        action="append",
        type=model_pair,
        metavar="BASE_MODEL=CANDIDATE_MODEL",
        help="compare these two models (repeat; default: by model id, else by position)",
    )
    compare.add_argument("--seed", type=_non_negative, default=0, help="random seed (default 0)")
    compare.add_argument("--json", action="store_true", help="JSON for machines")

    samples = commands.add_parser("samples", parents=conn, help="a run's per-sample rows")
    samples.add_argument("run", metavar="RUN")
    samples.add_argument("--failed", action="store_true", help="only permanently failed ones")
    samples.add_argument(
        "--task",
        metavar="TASK",
        help="only this task's samples: MODEL/DATASET[@VERSION] or a task id",
    )
    samples.add_argument(
        "--limit",
        type=_non_negative,
        metavar="N",
        help="at most N (0: all; default 50 in the table, all with --json)",
    )
    samples.add_argument("--json", action="store_true", help="JSON for machines")

    report = commands.add_parser(
        "report", parents=conn, help="write a self-contained HTML report of a run"
    )
    report.add_argument("run", metavar="RUN")
    report.add_argument("--baseline", metavar="RUN", help="add a comparison with this run")
    report.add_argument(
        "-o", "--output", default="report.html", metavar="FILE", help="default %(default)s"
    )

    contract = commands.add_parser("contract", help="check a server against this client's contract")
    contract_commands = contract.add_subparsers(dest="contract_command", required=True)
    check = contract_commands.add_parser(
        "check",
        parents=conn,
        help="is the server a compatible evolution of the contract (exit 4 when not)",
    )
    check.add_argument(
        "--against",
        metavar="IMAGE_OR_PROTO_DIR",
        help="the consumer's contract: a buf image (.binpb) or a proto directory "
        "(default: the contract this client was generated from)",
    )
    check.add_argument(
        "--rules",
        choices=["FILE", "PACKAGE", "WIRE_JSON", "WIRE"],
        default="FILE",
        help="buf breaking rule category (default %(default)s, as evald's release gate)",
    )
    bounds = check.add_argument_group("bounds on what the server's reflection may send")
    bounds.add_argument(
        "--max-files",
        type=_positive,
        default=MAX_FILES,
        metavar="N",
        help="descriptor files, the service's and its imports (default %(default)s)",
    )
    bounds.add_argument(
        "--max-bytes",
        type=_positive,
        default=MAX_BYTES,
        metavar="N",
        help="reflection answer bytes in all (default %(default)s)",
    )
    bounds.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=TIMEOUT_S,
        metavar="S",
        help="seconds for the whole fetch (default %(default)g)",
    )

    cancel = commands.add_parser("cancel", parents=conn, help="cancel a run")
    cancel.add_argument("run", metavar="RUN")

    retry = commands.add_parser("retry", parents=conn, help="re-queue a run's failed samples")
    retry.add_argument("run", metavar="RUN")
    retry.add_argument(
        "--task",
        action="append",
        metavar="TASK",
        help="only this task: MODEL/DATASET[@VERSION] or a task id (repeat for several)",
    )
    retry.add_argument(
        "--category", action="append", choices=_CATEGORIES, help="only this error category"
    )
    retry.add_argument(
        "--reason",
        action="append",
        metavar="REASON",
        help="only samples whose last error has this reason, e.g. PROVIDER_RATE_LIMITED "
        "(repeat for several)",
    )
    retry.add_argument(
        "--state",
        action="append",
        choices=[SubtaskState.FAILED_PERMANENT.value, SubtaskState.CANCELLED.value],
        help="re-queue samples in this state (default failed_permanent; cancelled resumes "
        "a cancelled run)",
    )
    rescore = commands.add_parser(
        "rescore",
        parents=conn,
        help="score a finished run's answers again as a new run (no provider call)",
    )
    rescore.add_argument("run", metavar="RUN", help="the finished run")
    rescore.add_argument(
        "--reducer",
        action="append",
        metavar="REDUCER",
        help="pass@K, pass^K, majority or mean over each record's repeats, replacing the "
        "run's (repeat for several)",
    )
    rescore.add_argument(
        "--choice-scoring",
        choices=["text", "logprobs"],
        help="read multiple-choice answers as text or by their stored log-probabilities",
    )
    rescore.add_argument("--name", default="", help="the new run's name")
    rescore.add_argument("--request-id", help="idempotency key")
    rescore.add_argument(
        "--watch",
        action="store_true",
        help="follow the new run until it ends; exit 0 succeeded, 3 partial, 4 failed",
    )
    _accept_partial(rescore)
    return parser


def _accept_partial(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--accept-partial",
        action="store_true",
        help="exit 0 when the run ends partial (some samples failed for good)",
    )


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return value
