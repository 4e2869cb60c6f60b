"""Helpers every test folder shares: record builders and JSONL bodies, the
``[[models]]`` table of a simulated model, a bounded wait loop, a free loopback port,
and a failed call's status unpacked (code, message, google.rpc details)."""

import json
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status


def jsonl(records: Iterable[Mapping[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def classification_records(count: int, *, prefix: str = "r") -> list[dict[str, Any]]:
    """``count`` two-label classification records (ids ``{prefix}0`` …)."""
    return [
        {
            "id": f"{prefix}{i}",
            "input": f"review number {i}",
            "label": "pos" if i % 2 else "neg",
            "choices": ["pos", "neg"],
        }
        for i in range(count)
    ]


def classification_jsonl(count: int, *, prefix: str = "r") -> bytes:
    return jsonl(classification_records(count, prefix=prefix))


def simulated_model(
    model_id: str, *, latency_ms: float = 1.0, max_concurrency: int = 8, **simulator: Any
) -> dict[str, Any]:
    """A ``[[models]]`` table of the built-in simulated provider, at a fixed latency;
    ``simulator`` sets its other settings (accuracy, fault_rate, seed)."""
    return {
        "id": model_id,
        "provider": "simulated",
        "max_concurrency": max_concurrency,
        "simulator": {"latency_ms_median": latency_ms, "latency_sigma": 0.0, **simulator},
    }


def run_cli(capsys: Any, *argv: str) -> tuple[int, str, str]:
    """``evald ARGV`` in this process: (exit code, stdout, stderr); ``capsys`` is pytest's."""
    from evald_cli.main import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def free_port() -> int:
    """A loopback port free now (for a server that cannot be given port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def wait_for(
    probe: Callable[[], Awaitable[Any]], *, timeout_s: float = 20.0, every_s: float = 0.02
) -> Any:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout_s``."""
    with anyio.fail_after(timeout_s):
        while True:
            value = await probe()
            if value:
                return value
            await anyio.sleep(every_s)


@dataclass(frozen=True, slots=True)
class RpcFailure:
    """What a failed call said: code, message and the unpacked google.rpc details."""

    code: grpc.StatusCode
    message: str
    reason: str = ""
    domain: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)
    violations: Mapping[str, str] = field(default_factory=dict)  # field → description
    retry_delay_s: float | None = None
    detail_types: tuple[str, ...] = ()


def failure_of(error: grpc.RpcError) -> RpcFailure:
    """Unpack a failed call's status with ``grpc_status.rpc_status.from_call``."""
    code = error.code()
    message = error.details() or ""
    status = rpc_status.from_call(error)
    if status is None:
        return RpcFailure(code, message)
    info = error_details_pb2.ErrorInfo()
    bad = error_details_pb2.BadRequest()
    retry = error_details_pb2.RetryInfo()
    found: dict[str, Any] = {}
    types = []
    for detail in status.details:
        types.append(detail.TypeName())
        if detail.Unpack(info):
            found.update(reason=info.reason, domain=info.domain, metadata=dict(info.metadata))
        elif detail.Unpack(bad):
            found["violations"] = {v.field: v.description for v in bad.field_violations}
        elif detail.Unpack(retry):
            delay = retry.retry_delay
            found["retry_delay_s"] = delay.seconds + delay.nanos / 1e9
    assert status.code == code.value[0], "the Status proto and the call agree on the code"
    assert status.message == message
    return RpcFailure(code, message, detail_types=tuple(types), **found)


def status_of(error: grpc.RpcError) -> tuple[str, str]:
    """(gRPC code name, ErrorInfo reason or "") of a failed call."""
    failure = failure_of(error)
    return failure.code.name, failure.reason
