"""``evald contract check``: is the evald behind ``--server`` a compatible evolution of
the contract this consumer was built against?

1. The server's contract: its descriptors fetched through gRPC reflection (v1, falling
   back to v1alpha), starting from ``evald.v1.EvaluationService`` and following every
   import, within bounds (``_reflection``), written as an image (a
   ``FileDescriptorSet``).
2. The consumer's contract: ``--against`` (a buf image ``.binpb`` or a proto directory),
   by default the descriptors the installed ``evald.v1`` code was generated from.
3. ``buf breaking SERVER --against CONSUMER`` with the chosen rules (default FILE, the
   rules evald's own release gate applies), imports (google/*) excluded.

Exit 0 when compatible, 4 when buf reports breaking changes (printed), 1 when the check
could not run (no reflection, no buf, an unreadable ``--against``) or the server's
reflection broke a bound of ``_reflection`` (files, bytes, time) or sent what is not a
descriptor: one line each, never a traceback.
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FileDescriptor

from evald.v1 import service_pb2
from evald_cli._errors import CliError
from evald_cli._reflection import SERVICE, ReflectionLimits, fetch_descriptors
from evald_cli._terminal import printable

EXIT_INCOMPATIBLE = 4
_BUF_TIMEOUT_S = 120


def server_descriptors(
    channel: grpc.Channel, limits: ReflectionLimits
) -> tuple[descriptor_pb2.FileDescriptorSet, str]:
    """The server's files for ``evald.v1.EvaluationService`` and everything they import,
    as an image, and the reflection version that answered (``_reflection``: within
    ``limits``)."""
    files, version = fetch_descriptors(channel, limits)
    ordered = _ordered(files)
    _with_json_names(ordered)
    return descriptor_pb2.FileDescriptorSet(file=ordered), version


def _json_name(name: str) -> str:
    """protoc's default JSON name: underscores dropped, the letter after one upper-cased."""
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _with_json_names(files: list[descriptor_pb2.FileDescriptorProto]) -> None:
    """Python's runtime descriptors (what reflection serves, what ``CopyToProto`` gives)
    leave ``json_name`` out; protoc and buf fill it in. Filled the same way on both sides,
    the JSON names compare instead of all reading as changed."""

    def fields(
        message: descriptor_pb2.DescriptorProto,
    ) -> Iterator[descriptor_pb2.FieldDescriptorProto]:
        yield from message.field
        yield from message.extension
        for nested in message.nested_type:
            yield from fields(nested)

    for file in files:
        every = [f for m in file.message_type for f in fields(m)] + list(file.extension)
        for field in every:
            if not field.HasField("json_name"):
                field.json_name = _json_name(field.name)


def _ordered(
    files: dict[str, descriptor_pb2.FileDescriptorProto],
) -> list[descriptor_pb2.FileDescriptorProto]:
    """Dependencies before dependents, as an image requires."""
    ordered: list[descriptor_pb2.FileDescriptorProto] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen or name not in files:
            return
        seen.add(name)
        for dependency in files[name].dependency:
            visit(dependency)
        ordered.append(files[name])

    for name in sorted(files):
        visit(name)
    return ordered


def _closure(descriptor: FileDescriptor) -> Iterator[FileDescriptor]:
    seen: set[str] = set()

    def visit(file: FileDescriptor) -> Iterator[FileDescriptor]:
        if file.name in seen:
            return
        seen.add(file.name)
        for dependency in file.dependencies:
            yield from visit(dependency)
        yield file

    yield from visit(descriptor)


def client_descriptors() -> descriptor_pb2.FileDescriptorSet:
    """The contract the installed ``evald.v1`` code was generated from."""
    files = []
    for file in _closure(service_pb2.DESCRIPTOR):
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        files.append(proto)
    _with_json_names(files)
    return descriptor_pb2.FileDescriptorSet(file=files)


def buf_binary() -> str:
    beside_python = Path(sys.executable).parent / "buf"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("buf")
    if found is None:
        raise CliError("buf not found: install it (pip install buf-bin) or put it on PATH")
    return found


def _buf(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [buf_binary(), *args], capture_output=True, text=True, timeout=_BUF_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        raise CliError(f"buf {args[0]} did not finish in {_BUF_TIMEOUT_S} s") from exc


def build_image(workspace: Path, target: Path) -> Path:
    """A proto directory (with its own buf.yaml) built into an image, as the baselines are."""
    done = _buf("build", str(workspace), "--exclude-source-info", "-o", str(target))
    if done.returncode != 0:
        raise CliError(f"buf build {workspace} failed: {(done.stdout + done.stderr).strip()}")
    return target


def contract_closure(image: Path, target: Path) -> Path:
    """Only the file declaring ``evald.v1.EvaluationService`` and what it imports: a
    consumer's workspace may hold other files (all of googleapis) the server never
    serves, which buf would report as deleted."""
    try:
        files = descriptor_pb2.FileDescriptorSet.FromString(image.read_bytes()).file
    except Exception as exc:  # protobuf raises DecodeError or others on garbage
        raise CliError(f"--against {image}: not a descriptor image ({exc})") from exc
    by_name = {f.name: f for f in files}
    package, _, service = SERVICE.rpartition(".")
    roots = [
        f.name for f in files if f.package == package and any(s.name == service for s in f.service)
    ]
    if not roots:
        raise CliError(f"--against {image}: declares no {SERVICE}")
    kept = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in kept or name not in by_name:
            continue
        kept.add(name)
        pending.extend(by_name[name].dependency)
    closure = descriptor_pb2.FileDescriptorSet(file=[f for f in files if f.name in kept])
    target.write_bytes(closure.SerializeToString())
    return target


def breaking_changes(server_image: Path, against: Path, rules: str) -> tuple[bool, str]:
    """``buf breaking``: (compatible, buf's report)."""
    config = json.dumps({"version": "v2", "breaking": {"use": [rules]}})
    done = _buf(
        "breaking", str(server_image), "--against", str(against),
        "--config", config, "--exclude-imports", "--error-format", "text",
    )  # fmt: skip
    report = (done.stdout + done.stderr).strip()
    if done.returncode not in (0, 100):  # 100: breaking changes found
        raise CliError(f"buf breaking could not compare the contracts: {report}")
    return done.returncode == 0, report


def _channel(args: argparse.Namespace, limits: ReflectionLimits) -> grpc.Channel:
    options = limits.channel_options()
    if args.tls or args.ca_cert:
        roots = Path(args.ca_cert).read_bytes() if args.ca_cert else None
        credentials = grpc.ssl_channel_credentials(roots)
        return grpc.secure_channel(args.server, credentials, options=options)
    return grpc.insecure_channel(args.server, options=options)


def contract_check(args: argparse.Namespace) -> int:
    limits = ReflectionLimits(
        max_files=args.max_files, max_bytes=args.max_bytes, timeout_s=args.timeout
    )
    with _channel(args, limits) as channel:
        server, version = server_descriptors(channel, limits)
    with tempfile.TemporaryDirectory(prefix="evald-contract-") as tmp:
        server_image = Path(tmp) / "server.binpb"
        server_image.write_bytes(server.SerializeToString())
        if args.against:
            against = Path(args.against)
            if not against.exists():
                raise CliError(f"--against {against}: no such file or directory")
            source = str(against)
            if against.is_dir():
                against = build_image(against, Path(tmp) / "built.binpb")
            against = contract_closure(against, Path(tmp) / "against.binpb")
        else:
            against = Path(tmp) / "client.binpb"
            against.write_bytes(client_descriptors().SerializeToString())
            source = "the contract this client was generated from"
        compatible, report = breaking_changes(server_image, against, args.rules)
    verdict = "compatible" if compatible else "INCOMPATIBLE"
    print(
        f"{args.server} (reflection {version}) is {verdict} with {source} "
        f"under buf's {args.rules} breaking rules"
    )
    if report:
        print(printable(report))  # buf quotes the server's names: shown, never obeyed
    return 0 if compatible else EXIT_INCOMPATIBLE
