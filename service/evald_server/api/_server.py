"""The gRPC server's lifecycle: listen, serve, drain on SIGTERM, stop.

Besides ``evald.v1.EvaluationService`` it serves the standard health service
(SERVING while up, NOT_SERVING while draining) and server reflection (v1 and v1alpha),
so ``buf curl`` and grpcurl work without the .proto files.

Drain order on SIGTERM/SIGINT: health goes NOT_SERVING and new RPCs are refused
(UNAVAILABLE, SERVER_DRAINING); the engine stops claiming work, gives provider calls
in flight ``grace_s`` to finish (an answer already paid for is kept), aborts the rest
(their subtasks return to pending without spending a retry) and flushes the store;
then open streams get ``grace_s`` to finish and the process exits.
"""

import logging
import signal
from collections.abc import Callable
from pathlib import Path

import anyio
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from evald.v1 import service_pb2
from evald_server.api._auth import TokenAuthenticator
from evald_server.api._reflection import enable_reflection
from evald_server.api._registration import add_evaluation_service
from evald_server.api._servicer import EvaluationServicer
from evald_server.app import Evald
from evald_server.config import ConfigError, ServerConfig, ServerSection, load_config
from evald_server.metrics import metrics_endpoint

log = logging.getLogger("evald.server")

SERVICE_NAME = service_pb2.DESCRIPTOR.services_by_name["EvaluationService"].full_name


def _channel_options(config: ServerConfig) -> list[tuple[str, int]]:
    size = config.limits.max_message_bytes
    return [
        ("grpc.max_receive_message_length", size),
        ("grpc.max_send_message_length", size),
        # Keepalive: notice dead watchers, and let idle clients ping us.
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
        ("grpc.http2.max_pings_without_data", 0),
        # Two servers must never share a port by accident.
        ("grpc.so_reuseport", 0),
    ]


def _credentials(section: ServerSection) -> grpc.ServerCredentials | None:
    if section.tls_cert is None or section.tls_key is None:
        return None
    client_ca = section.tls_client_ca.read_bytes() if section.tls_client_ca else None
    return grpc.ssl_server_credentials(
        [(section.tls_key.read_bytes(), section.tls_cert.read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )


async def serve(config: ServerConfig, *, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until SIGTERM/SIGINT or cancellation; ``on_ready`` gets "host:port"."""
    server = grpc.aio.server(options=_channel_options(config))
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    enable_reflection(server, (SERVICE_NAME, health.SERVICE_NAME))

    credentials = _credentials(config.server)
    try:
        if credentials is None:
            port = server.add_insecure_port(config.server.listen)
        else:
            port = server.add_secure_port(config.server.listen, credentials)
    except RuntimeError as exc:  # grpc's way of saying the address is taken or invalid
        raise ConfigError(f"server.listen: cannot bind {config.server.listen}") from exc
    if port == 0:  # older grpc releases answer 0 instead of raising
        raise ConfigError(f"server.listen: cannot bind {config.server.listen}")
    address = f"{config.server.host}:{port}"

    async with Evald.open(config) as app, metrics_endpoint(app, config.metrics.listen):
        servicer = EvaluationServicer(app, TokenAuthenticator(config.auth), config)
        add_evaluation_service(servicer, server)
        await server.start()
        for name in ("", SERVICE_NAME):
            await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("evald listening on %s", address)
        if on_ready is not None:
            on_ready(address)
        try:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("received %s: draining", signal.Signals(signum).name)
                    break
        finally:
            with anyio.CancelScope(shield=True):
                servicer.begin_drain()
                await health_servicer.enter_graceful_shutdown()
                await app.drain()
                await server.stop(config.server.grace_s)
                log.info("evald stopped")


def main_serve(config_path: Path, *, on_ready: Callable[[str], None] | None = None) -> int:
    """``evald serve``: load the config (``ConfigError`` names a bad key), serve, return 0."""
    config = load_config(config_path)
    anyio.run(lambda: serve(config, on_ready=on_ready))
    return 0
