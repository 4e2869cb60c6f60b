"""The gRPC server's lifecycle: listen, serve, drain on SIGTERM, stop.

Besides ``evald.v1.EvaluationService`` it serves the standard health service
(SERVING while up, NOT_SERVING while draining) and server reflection (v1 and v1alpha),
so ``buf curl`` and grpcurl work without the .proto files.

Drain order on SIGTERM/SIGINT: health goes NOT_SERVING and new RPCs are refused
(UNAVAILABLE, SERVER_DRAINING); the engine stops claiming work, gives provider calls
in flight ``grace_s`` to finish (an answer already paid for is kept), aborts the rest
(their subtasks return to pending without spending a retry) and flushes the store;
then open streams get ``grace_s`` to finish and the process exits.

The signal handlers stay installed for the whole drain, so a repeated signal can never
kill the process half-way. A second SIGTERM is logged and changes nothing. A second
SIGINT (Ctrl-C twice) hurries the drain: the calls in flight are aborted at once
(back to pending, no retry spent) and open streams get no grace; the store is still
flushed, so nothing finished is lost.

While serving, the store is checked every ``STORE_CHECK_S``: a store file deleted or
replaced under the server turns health NOT_SERVING, logs an error, and the server
stops (the store refuses writes that would be lost). A database that cannot be reached
(PostgreSQL) turns health NOT_SERVING until it can be again.
"""

import functools
import logging
import signal
import ssl
import sys
from collections.abc import AsyncIterator, Callable
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
from evald_server.store import StoreError, StoreLost

log = logging.getLogger("evald.server")

# The ready line's start (then HOST:PORT): what `python -m evald_server.api` prints first
# and logs, and what a parent process reads the address from. `evald serve` prints the
# same (evald_cli._serve.READY_PREFIX, kept equal by a test).
READY_PREFIX = "evald listening on "

STORE_CHECK_S = 1.0

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
    _check_tls_files(section)
    client_ca = section.tls_client_ca.read_bytes() if section.tls_client_ca else None
    return grpc.ssl_server_credentials(
        [(section.tls_key.read_bytes(), section.tls_cert.read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )


def _check_tls_files(section: ServerSection) -> None:
    """Name the TLS file at fault: grpc only says that it cannot bind the port."""
    assert section.tls_cert is not None
    assert section.tls_key is not None
    for key, path in (
        ("tls_cert", section.tls_cert),
        ("tls_key", section.tls_key),
        ("tls_client_ca", section.tls_client_ca),
    ):
        if path is None:
            continue
        try:
            path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"server.{key}: cannot read {path}: {exc.strerror}") from exc
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(section.tls_cert, section.tls_key)
    except ssl.SSLError as exc:
        raise ConfigError(
            f"server.tls_cert / server.tls_key: {_tls_problem(exc)} "
            f"({section.tls_cert}, {section.tls_key})"
        ) from exc
    if section.tls_client_ca is not None:
        try:
            context.load_verify_locations(cafile=section.tls_client_ca)
        except ssl.SSLError as exc:
            raise ConfigError(
                f"server.tls_client_ca: not a PEM CA certificate ({section.tls_client_ca}): "
                f"{exc.reason or exc}"
            ) from exc


def _tls_problem(exc: ssl.SSLError) -> str:
    if exc.reason == "KEY_VALUES_MISMATCH":
        return "the private key does not belong to the certificate (KEY_VALUES_MISMATCH)"
    return f"not a PEM certificate and its private key ({exc.reason or exc})"


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

    try:
        await _serve_until_signal(config, server, health_servicer, address, on_ready)
    except BaseExceptionGroup as group:
        error = _operator_error(group)
        if error is group:
            raise
        raise error from group


def _operator_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The store or config error a task group wrapped, unwrapped: callers print its
    one-line reason. Anything else stays the group (a bug, with its traceback)."""
    leaf: BaseException = group
    while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
        leaf = leaf.exceptions[0]
    return leaf if isinstance(leaf, StoreError | ConfigError) else group


async def _serve_until_signal(
    config: ServerConfig,
    server: grpc.aio.Server,
    health_servicer: health.aio.HealthServicer,
    address: str,
    on_ready: Callable[[str], None] | None,
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with Evald.open(config) as app, metrics_endpoint(app, config.metrics.listen):
            servicer = EvaluationServicer(app, TokenAuthenticator(config.auth), config)
            add_evaluation_service(servicer, server)
            await server.start()
            await _set_health(health_servicer, health_pb2.HealthCheckResponse.SERVING)
            log.info("%s%s", READY_PREFIX, address)
            if on_ready is not None:
                on_ready(address)
            hurried = False
            try:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(_watch_store, app, health_servicer, tg.cancel_scope)
                    async for signum in signals:
                        log.info("received %s: draining", signal.Signals(signum).name)
                        break
                    tg.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    servicer.begin_drain()
                    await health_servicer.enter_graceful_shutdown()
                    async with anyio.create_task_group() as drain:

                        def hurry() -> None:
                            nonlocal hurried
                            hurried = True
                            app.engine.dispatcher.abort_inflight()

                        drain.start_soon(_signals_while_draining, signals, hurry)
                        await app.drain()
                        await server.stop(0 if hurried else config.server.grace_s)
                        drain.cancel_scope.cancel()
                    log.info("evald stopped")
            problem = app.engine.store.problem()
            if problem is not None:
                raise StoreLost(problem)


async def _set_health(health_servicer: health.aio.HealthServicer, status: int) -> None:
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, status)


async def _watch_store(
    app: Evald, health_servicer: health.aio.HealthServicer, serving: anyio.CancelScope
) -> None:
    """Stop serving, loudly, once the store file is deleted or replaced under us; report
    NOT_SERVING while the database cannot be reached, SERVING again when it can."""
    reachable = True
    while True:
        await anyio.sleep(STORE_CHECK_S)
        problem = app.engine.store.problem()
        if problem is not None:
            await _set_health(health_servicer, health_pb2.HealthCheckResponse.NOT_SERVING)
            log.error("the store is lost: health NOT_SERVING, evald stops")
            serving.cancel()
            return
        down = app.engine.store.unavailable()
        if (down is None) != reachable:
            reachable = down is None
            if reachable:
                await _set_health(health_servicer, health_pb2.HealthCheckResponse.SERVING)
                log.info("the database is reachable again: health SERVING")
            else:
                await _set_health(health_servicer, health_pb2.HealthCheckResponse.NOT_SERVING)
                log.error("the database is unreachable (%s): health NOT_SERVING", down)


async def _signals_while_draining(signals: AsyncIterator[int], hurry: Callable[[], None]) -> None:
    async for signum in signals:
        if signum == signal.SIGINT:
            log.warning(
                "received SIGINT again: aborting the calls in flight now (back to pending); "
                "the store is still flushed"
            )
            hurry()
        else:
            log.warning("received SIGTERM during the drain: the drain goes on")


def run_server(config_path: Path, *, log_level: str = "INFO") -> int:
    """The server process's one entry (``evald serve`` and ``python -m evald_server.api``):
    logs to stderr, the ready line first on stdout, one line on stderr for whatever keeps
    it from starting. Exit status: 0 after a drain; 2 when it cannot start (an invalid
    config, a listen address taken, a store in use by another server or unusable); 1
    when it stopped because its store was lost while it served."""
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    def announce(address: str) -> None:
        print(f"{READY_PREFIX}{address}", flush=True)

    try:
        config = load_config(config_path)
        anyio.run(functools.partial(serve, config, on_ready=announce), backend="asyncio")
    except ConfigError as error:
        print(f"evald: invalid config: {error}", file=sys.stderr)
        return 2
    except StoreLost as error:
        print(f"evald: stopped: {error}", file=sys.stderr)
        return 1
    except StoreError as error:
        print(f"evald: cannot open the store: {error}", file=sys.stderr)
        return 2
    return 0
