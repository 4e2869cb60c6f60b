"""The server's TOML configuration, validated with pydantic.

``load_config(path)`` raises ``ConfigError`` with a message that names the offending
key (``models[1].max_concurrency: Input should be greater than or equal to 1``).

docs/configuration.md has a table per section with every key, its default and its
meaning; ``tests/test_config_doc.py`` walks these models and fails on a key the page
does not document, a documented key that does not exist, or a default that differs.
"""

import ipaddress
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator


class ConfigError(Exception):
    """The configuration file is missing, unreadable or invalid; the message names the key."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GenerationParams(_Section):
    """Default sampling parameters of a model; a run may override them."""

    temperature: Annotated[float, Field(ge=0.0, le=2.0)] | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def merged(self, overrides: "GenerationParams | None") -> "GenerationParams":
        """These params with every field that ``overrides`` sets replaced."""
        if overrides is None:
            return self
        changed = overrides.model_dump(exclude_unset=True)
        return self.model_copy(update=changed)


class SimulatorSettings(_Section):
    """How the built-in simulated model behaves (ignored by other providers).

    The simulator is not a language model: it sees the record's reference and answers
    right with probability ``accuracy``, otherwise plausibly wrong, deterministically
    for a given seed, after a log-normal latency.
    """

    accuracy: Annotated[float, Field(ge=0.0, le=1.0)] = 0.8
    latency_ms_median: Annotated[float, Field(ge=0.0)] = 50.0
    latency_sigma: Annotated[float, Field(ge=0.0, le=3.0)] = 0.4
    fault_rate: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    seed: int = 0


class AdaptiveConcurrency(_Section):
    """AIMD on the model's concurrency (docs/rate-limits-and-cost.md, "Adaptive
    concurrency"); ``max`` is the model's ``max_concurrency``."""

    enabled: bool = False
    min: Annotated[int, Field(ge=1, le=10_000)] = 1
    start: Annotated[int, Field(ge=1, le=10_000)] | None = None  # default: min
    # Successes in a row that earn one more slot after slow start (default: the current
    # value, i.e. one more slot per round of calls).
    increase_after: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    decrease_factor: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.8
    # After a decrease, no increase for this long.
    cooldown_s: Annotated[float, Field(ge=0.0, le=3600.0)] = 0.2


class Price(_Section):
    """A model's price in USD per million tokens (docs/rate-limits-and-cost.md, "Cost
    and run budgets")."""

    input_per_million: Annotated[float, Field(ge=0.0, le=1_000_000.0)]
    output_per_million: Annotated[float, Field(ge=0.0, le=1_000_000.0)]


class ModelConfig(_Section):
    """One ``[[models]]`` table: a model clients may refer to by ``id``."""

    id: Annotated[
        str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
    ]
    provider: Literal["openai", "simulated"]
    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    max_concurrency: Annotated[int, Field(ge=1, le=10_000)] = 16
    timeout_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 60.0
    stream: bool = False
    # The OpenAI-compatible endpoints the model is served on: "chat" (/v1/chat/completions,
    # the server's chat template applies) and "completions" (/v1/completions, the text as
    # sent). Loglikelihood scoring and plain prompts need "completions".
    endpoints: tuple[Literal["chat", "completions"], ...] = ("chat",)
    # max_tokens of a loglikelihood call (echo + logprobs): 1, what lm-evaluation-harness
    # sends and every server accepts (llama-cpp-python reads 0 as "until the context is
    # full"); 0 where a server generates nothing for it (OpenAI's legacy completions).
    echo_max_tokens: Literal[0, 1] = 1
    # Where a loglikelihood call reads the prompt's log-probabilities: "echo" (echo +
    # logprobs, as OpenAI's legacy completions, vLLM and llama-cpp-python offer) or
    # "prompt_logprobs" (vLLM's prompt_logprobs, no echo).
    loglikelihood_source: Literal["echo", "prompt_logprobs"] = "echo"
    # How a structured-output task asks this model for JSON following a record's schema,
    # besides the prompt (which always shows it): "prompt" (nothing more), "json_schema"
    # (OpenAI's response_format, vLLM), "json_object" (response_format json_object with
    # a "schema": llama-cpp-python's server, which refuses "json_schema").
    structured_output_format: Literal["prompt", "json_schema", "json_object"] = "prompt"
    # Bounds on what the provider may send back (docs/configuration.md, ``[[models]]``).
    max_response_bytes: Annotated[int, Field(ge=1024, le=1 << 30)] = 8 * 1024 * 1024
    max_answer_bytes: Annotated[int, Field(ge=1, le=1 << 30)] = 1024 * 1024
    # The model's context window in tokens: the most a provider may report using for one
    # call (prompt + completion); beyond it the usage is unknown and the sample flagged
    # (default: providers._answer_bounds.DEFAULT_CALL_TOKENS). At most 2^31 - 1, what
    # the stores keep per call.
    context_tokens: Annotated[int, Field(ge=1, le=(1 << 31) - 1)] | None = None
    # The longest a provider's x-ratelimit-reset-* header may hold the model's calls.
    rate_limit_reset_cap_s: Annotated[float, Field(ge=0.0, le=86_400.0)] = 600.0
    params: GenerationParams = GenerationParams()
    simulator: SimulatorSettings = SimulatorSettings()
    # Rate control, shared by every run on the model (docs/rate-limits-and-cost.md).
    adaptive_concurrency: AdaptiveConcurrency = AdaptiveConcurrency()
    requests_per_minute: Annotated[float, Field(gt=0.0)] | None = None
    tokens_per_minute: Annotated[float, Field(gt=0.0)] | None = None
    budget_burst_s: Annotated[float, Field(gt=0.0, le=60.0)] = 1.0  # bucket depth
    price: Price | None = None  # cost accounting; None: the model's cost is unknown

    @model_validator(mode="after")
    def _adaptive_bounds(self) -> "ModelConfig":
        adaptive = self.adaptive_concurrency
        start = adaptive.min if adaptive.start is None else adaptive.start
        if not adaptive.min <= start <= self.max_concurrency:
            raise ValueError(
                "adaptive_concurrency: needs min <= start <= max_concurrency, got "
                f"min={adaptive.min}, start={start}, max_concurrency={self.max_concurrency}"
            )
        return self

    @model_validator(mode="after")
    def _endpoint_list(self) -> "ModelConfig":
        if not self.endpoints:
            raise ValueError("endpoints: at least one of 'chat', 'completions'")
        if len(set(self.endpoints)) != len(self.endpoints):
            raise ValueError(f"endpoints: each at most once, got {list(self.endpoints)}")
        if self.provider != "openai" and self.endpoints != ("chat",):
            raise ValueError(f"endpoints: provider {self.provider!r} serves 'chat' only")
        return self

    @model_validator(mode="after")
    def _provider_fields(self) -> "ModelConfig":
        if self.provider == "openai":
            if not self.base_url:
                raise ValueError("base_url is required for provider 'openai'")
            if not self.base_url.startswith(("http://", "https://")):
                raise ValueError("base_url must start with http:// or https://")
        return self

    @property
    def provider_model(self) -> str:
        """The model name sent to the provider (defaults to ``id``)."""
        return self.model or self.id


class ServerSection(_Section):
    listen: str = "127.0.0.1:50051"
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    grace_s: Annotated[float, Field(ge=0.0, le=300.0)] = 10.0
    # A model with ready work and no call in flight this long is logged as stalled.
    stall_warning_s: Annotated[float, Field(gt=0.0, le=86_400.0)] = 60.0

    @model_validator(mode="after")
    def _tls_pair(self) -> "ServerSection":
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key must be given together")
        if self.tls_client_ca is not None and self.tls_cert is None:
            raise ValueError("tls_client_ca needs tls_cert and tls_key")
        return self

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0].strip("[]")

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


# The store URL schemes this build can open: the keys of the store package's opener map
# (a test keeps the two equal), so a URL passes the config only if its store exists.
STORE_SCHEMES: tuple[str, ...] = ("sqlite", "postgresql", "postgres")


class StoreSection(_Section):
    """Where the state lives. ``sqlite:///file`` (one process), or ``postgresql://…``
    shared by several replicas (docs/replicas.md); the settings below apply to
    PostgreSQL only."""

    url: str = "sqlite:///evald.sqlite3"
    # Connections of this replica's pool (each replica has its own).
    pool_size: Annotated[int, Field(ge=2, le=1000)] = 10
    # This replica's name in the membership table; default: host name + process id.
    # Unique per replica: a second live replica with the same id is refused at start.
    replica_id: (
        Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")] | None
    ) = None
    # A replica whose heartbeat is older than lease_s is dead: its running work goes back
    # to pending, its scoring jobs to whoever takes them. Heartbeats every heartbeat_s.
    lease_s: Annotated[float, Field(ge=0.2, le=3600.0)] = 15.0
    heartbeat_s: Annotated[float, Field(ge=0.05, le=600.0)] = 3.0
    # How long an operation waits for an unreachable database before it fails.
    unavailable_wait_s: Annotated[float, Field(ge=0.0, le=86_400.0)] = 120.0

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, url: str) -> str:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        if scheme not in STORE_SCHEMES:
            known = ", ".join(STORE_SCHEMES)
            raise ValueError(
                f"store url scheme must be one of {known} (e.g. sqlite:///evald.sqlite3), "
                f"got {scheme or 'no scheme'!r}"
            )
        return url

    @model_validator(mode="after")
    def _heartbeat_within_lease(self) -> "StoreSection":
        if self.heartbeat_s >= self.lease_s / 2:
            raise ValueError(
                f"heartbeat_s ({self.heartbeat_s}) must be under half of lease_s "
                f"({self.lease_s}): a replica must renew its lease before it expires"
            )
        return self

    def replica_options(self) -> dict[str, object]:
        """What a PostgreSQL store is opened with (SQLite ignores them)."""
        return {
            "pool_size": self.pool_size,
            "replica_id": self.replica_id,
            "lease_s": self.lease_s,
            "heartbeat_s": self.heartbeat_s,
            "wait_s": self.unavailable_wait_s,
        }


class LimitsSection(_Section):
    max_inflight: Annotated[int, Field(ge=1, le=100_000)] = 256
    max_subtasks_per_run: Annotated[int, Field(ge=1)] = 25_000
    max_records_per_dataset: Annotated[int, Field(ge=1)] = 100_000
    max_runs_in_flight_per_tenant: Annotated[int, Field(ge=1)] = 16
    max_message_bytes: Annotated[int, Field(ge=1024)] = 16 * 1024 * 1024
    max_record_bytes: Annotated[int, Field(ge=64)] = 1024 * 1024
    events_retained_per_run: Annotated[int, Field(ge=100)] = 100_000


class EngineSection(_Section):
    """``[engine]``: tuning of the engine and the upload path. The defaults suit one
    machine; none of these changes what a run computes, only when and how fast."""

    # A watcher with nothing new gets a heartbeat carrying the current seq this often.
    heartbeat_s: Annotated[float, Field(gt=0.0, le=3600.0)] = 5.0
    # Outcomes are written in batches of at most ``commit_batch``, at most
    # ``commit_delay_s`` after the first of a batch arrived.
    commit_batch: Annotated[int, Field(ge=1, le=100_000)] = 256
    commit_delay_s: Annotated[float, Field(ge=0.0, le=10.0)] = 0.02
    # Scoring worker processes (default: one less than the CPUs, between 1 and 4).
    scoring_workers: Annotated[int, Field(ge=1, le=256)] | None = None
    # Finished tasks scored at once (each holds one worker while it is scored).
    scoring_concurrency: Annotated[int, Field(ge=1, le=256)] = 2
    # Samples per page a task is scored in while its answers arrive (pools that can).
    score_page_size: Annotated[int, Field(ge=1, le=1_000_000)] = 2000
    # The most one dataset upload may be: it is held in memory while it is validated.
    max_upload_bytes: Annotated[int, Field(ge=1024, le=1 << 40)] = 512 * 1024 * 1024


class MetricsSection(_Section):
    # The endpoint has no authentication: loopback only (a sidecar or node agent scrapes).
    listen: str | None = None

    @field_validator("listen")
    @classmethod
    def _loopback(cls, listen: str | None) -> str | None:
        if listen is None:
            return None
        host, sep, port = listen.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("must be HOST:PORT")
        host = host.strip("[]")
        loopback = host == "localhost"
        if not loopback:
            try:
                loopback = ipaddress.ip_address(host).is_loopback
            except ValueError:
                loopback = False
        if not loopback:
            raise ValueError(
                f"must be a loopback address (the endpoint has no authentication), not {host!r}"
            )
        return listen


class TokenEntry(_Section):
    tenant: Annotated[str, Field(min_length=1, max_length=128)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class AuthSection(_Section):
    tokens: tuple[TokenEntry, ...] = ()


class CacheSection(_Section):
    """The response cache that runs opt into (``response_cache``)."""

    ttl_s: Annotated[float, Field(gt=0.0, le=365 * 86_400.0)] = 7 * 86_400.0
    max_entries: Annotated[int, Field(ge=1, le=100_000_000)] = 100_000
    # Models whose cached answers every tenant shares (default: each tenant its own).
    shared_models: tuple[str, ...] = ()


_KiB = 1024
_MiB = 1024 * _KiB
_GiB = 1024 * _MiB


class SandboxSection(_Section):
    """``[sandbox]``: the code sandbox (docs/SANDBOX.md). Off by default: code datasets
    are refused at CreateRun until it is enabled and works on this machine.

    The keys are ``sandbox.SandboxSettings``' fields, with its defaults and bounds
    (``tests/test_config.py`` keeps them equal); the settings check the rest (paths
    under ``system_paths``, ``output_bytes`` within ``file_size_bytes``) when the server
    starts, naming the key."""

    enabled: bool = False
    slots: Annotated[int, Field(ge=1, le=256)] = 2
    bwrap: str = "/usr/bin/bwrap"
    python: str = "/usr/bin/python3"
    system_paths: tuple[str, ...] = ("/usr", "/lib", "/lib64", "/bin", "/sbin")
    wall_timeout_s: Annotated[float, Field(ge=0.1, le=3600.0)] = 10.0
    cpu_seconds: Annotated[int, Field(ge=1, le=3600)] = 5
    memory_bytes: Annotated[int, Field(ge=64 * _MiB, le=1024 * _GiB)] = 1 * _GiB
    processes: Annotated[int, Field(ge=2, le=4096)] = 16
    file_size_bytes: Annotated[int, Field(ge=64 * _KiB, le=64 * _GiB)] = 16 * _MiB
    open_files: Annotated[int, Field(ge=16, le=1 << 20)] = 64
    tmpfs_bytes: Annotated[int, Field(ge=1 * _MiB, le=64 * _GiB)] = 64 * _MiB
    output_bytes: Annotated[int, Field(ge=1 * _KiB, le=64 * _GiB)] = 64 * _KiB
    traceback_lines: Annotated[int, Field(ge=1, le=1000)] = 20
    uid_base: Annotated[int, Field(ge=1000, le=2**32 - 2 - 256)] = 2_100_000_000


class ServerConfig(_Section):
    server: ServerSection = ServerSection()
    store: StoreSection = StoreSection()
    limits: LimitsSection = LimitsSection()
    models: tuple[ModelConfig, ...] = ()
    auth: AuthSection = AuthSection()
    metrics: MetricsSection = MetricsSection()
    engine: EngineSection = EngineSection()
    cache: CacheSection = CacheSection()
    sandbox: SandboxSection = SandboxSection()

    @model_validator(mode="after")
    def _shared_cache_models_known(self) -> "ServerConfig":
        unknown = sorted(set(self.cache.shared_models) - {m.id for m in self.models})
        if unknown:
            raise ValueError(f"cache.shared_models: not configured models: {unknown}")
        return self

    @model_validator(mode="after")
    def _unique_ids_and_local_mode(self) -> "ServerConfig":
        seen: set[str] = set()
        for model in self.models:
            if model.id in seen:
                raise ValueError(f"models: duplicate id {model.id!r}")
            seen.add(model.id)
        if not self.auth.tokens and not self.server.is_loopback:
            raise ValueError(
                "server.listen: without [[auth.tokens]] evald runs in local mode and "
                f"binds only to loopback, not {self.server.host!r}"
            )
        return self


def parse_config(data: dict[str, object]) -> ServerConfig:
    """Validate an already-parsed TOML document."""
    try:
        return ServerConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from exc


def load_config(path: Path) -> ServerConfig:
    """Read and validate ``path``; ``ConfigError`` names the offending key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    return parse_config(data)


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        location = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
        ).lstrip(".")
        lines.append(f"{location or 'config'}: {error['msg']}")
    return "; ".join(lines)
