"""How the SDK opens its grpc.aio channel: TLS, keepalive and message size limits."""

from dataclasses import dataclass
from pathlib import Path

import grpc

# Keepalive pings detect a dead connection under a quiet watch stream. They go only while a
# call is active, once a minute: a gRPC server with the default ping policy accepts that as
# long as it sends data in between (watch heartbeats); more often risks "too_many_pings".
_KEEPALIVE_TIME_MS = 60_000
_KEEPALIVE_TIMEOUT_MS = 20_000
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsConfig:
    """TLS settings: a CA bundle (PEM; ``None`` uses the system roots), an optional
    client certificate and key for mutual TLS, and an optional name to verify the
    server's certificate against instead of the target host."""

    root_certificates: bytes | None = None
    client_certificate: bytes | None = None
    client_key: bytes | None = None
    server_name: str | None = None

    @classmethod
    def from_files(
        cls,
        *,
        ca: Path | None = None,
        cert: Path | None = None,
        key: Path | None = None,
        server_name: str | None = None,
    ) -> "TlsConfig":
        """Read the PEM files given."""
        return cls(
            root_certificates=ca.read_bytes() if ca else None,
            client_certificate=cert.read_bytes() if cert else None,
            client_key=key.read_bytes() if key else None,
            server_name=server_name,
        )


def open_channel(target: str, *, tls: bool | TlsConfig, max_message_bytes: int) -> grpc.aio.Channel:
    """A channel to ``target``; call inside the event loop that will use it."""
    options: list[tuple[str, int | str]] = [
        ("grpc.keepalive_time_ms", _KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", _KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]
    if tls is False:
        return grpc.aio.insecure_channel(target, options=options)
    config = tls if isinstance(tls, TlsConfig) else TlsConfig()
    if config.server_name:
        options.append(("grpc.ssl_target_name_override", config.server_name))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=config.root_certificates,
        private_key=config.client_key,
        certificate_chain=config.client_certificate,
    )
    return grpc.aio.secure_channel(target, credentials, options=options)
