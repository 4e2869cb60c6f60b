"""Server configuration: valid files load, invalid ones name the offending key."""

import inspect
import typing
from pathlib import Path

import pytest

from evald_server.config import (
    STORE_SCHEMES,
    ConfigError,
    EngineSection,
    GenerationParams,
    ModelConfig,
    load_config,
)
from evald_server.providers import PROVIDER_BUILDERS, build_provider
from evald_server.scoring import ScoringPool
from evald_server.store import STORE_OPENERS

VALID = """
[server]
listen = "127.0.0.1:0"

[store]
url = "sqlite:///evald.sqlite3"

[limits]
max_inflight = 64

[[models]]
id = "small"
provider = "simulated"
max_concurrency = 8
simulator = { accuracy = 0.6, latency_ms_median = 5 }

[[models]]
id = "gpt"
provider = "openai"
base_url = "http://127.0.0.1:8000"
model = "gpt-4o-mini"
api_key_env = "OPENAI_API_KEY"
params = { temperature = 0.0, max_tokens = 64, stop = ["\\n\\n"] }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "evald.toml"
    path.write_text(text)
    return path


def test_valid_config_loads_with_defaults(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, VALID))
    assert config.limits.max_inflight == 64
    assert config.limits.max_subtasks_per_run == 25_000
    small, gpt = config.models
    assert small.simulator.accuracy == 0.6
    assert small.provider_model == "small"
    assert gpt.provider_model == "gpt-4o-mini"
    assert gpt.params.stop == ("\n\n",)
    assert config.server.is_loopback


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            "[[models]]\nid = 'a'\nprovider = 'simulated'\nmax_concurrency = 0\n",
            "models[0].max_concurrency",
        ),
        ("[[models]]\nid = 'a'\nprovider = 'vertex'\n", "models[0].provider"),
        ("[[models]]\nid = 'a'\nprovider = 'openai'\n", "base_url is required"),
        (
            "[[models]]\nid = 'a'\nprovider = 'openai'\nbase_url = 'ftp://x'\n",
            "base_url must start",
        ),
        (
            "[[models]]\nid='a'\nprovider='simulated'\n[[models]]\nid='a'\nprovider='simulated'\n",
            "duplicate id 'a'",
        ),
        ("[limits]\nmax_inflight = -1\n", "limits.max_inflight"),
        ("[limits]\nmax_inflight = 'many'\n", "limits.max_inflight"),
        ("[limits]\nmax_infligth = 4\n", "limits.max_infligth: Extra inputs are not permitted"),
        ("[server]\nlisten = '0.0.0.0:50051'\n", "binds only to loopback"),
        ("[server]\ntls_cert = 'c.pem'\n", "tls_cert and tls_key must be given together"),
        ("[store]\nurl = 'mysql://x'\n", "store.url"),
        ("[store]\nurl = 'postgresql://h/db'\nlease_s = 2\nheartbeat_s = 1\n", "heartbeat_s"),
        ("[store]\nreplica_id = 'a b'\n", "store.replica_id"),
        ("[store]\nurl = 'evald.sqlite3'\n", "store.url"),
        ("[[auth.tokens]]\ntenant = 't'\nsha256 = 'abc'\n", "auth.tokens[0].sha256"),
        ("[server\n", "invalid TOML"),
        ("[engine]\nheartbeat_s = 0\n", "engine.heartbeat_s"),
        ("[engine]\ncommit_batch = 0\n", "engine.commit_batch"),
        ("[engine]\ncommit_delay_s = -1\n", "engine.commit_delay_s"),
        ("[engine]\nscoring_workers = 0\n", "engine.scoring_workers"),
        ("[engine]\nscoring_concurrency = 0\n", "engine.scoring_concurrency"),
        ("[engine]\nmax_upload_bytes = 10\n", "engine.max_upload_bytes"),
        ("[engine]\nheartbeat = 1\n", "engine.heartbeat: Extra inputs are not permitted"),
    ],
)
def test_invalid_config_names_the_key(tmp_path: Path, text: str, named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write(tmp_path, text))
    assert named in str(caught.value)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "absent.toml")


def test_tokens_allow_binding_beyond_loopback(tmp_path: Path) -> None:
    token = f"[[auth.tokens]]\ntenant = 't'\nsha256 = '{'a' * 64}'\n"
    text = "[server]\nlisten = '0.0.0.0:50051'\n" + token
    assert not load_config(write(tmp_path, text)).server.is_loopback


def test_generation_overrides_replace_only_what_they_set() -> None:
    defaults = GenerationParams(temperature=0.7, max_tokens=32, stop=("x",))
    merged = defaults.merged(GenerationParams(max_tokens=8))
    assert merged == GenerationParams(temperature=0.7, max_tokens=8, stop=("x",))
    assert defaults.merged(None) is defaults


def test_the_config_accepts_exactly_the_schemes_a_store_opens() -> None:
    assert set(STORE_SCHEMES) == set(STORE_OPENERS)


def test_engine_tuning_loads_and_the_scoring_pool_defaults_alike(tmp_path: Path) -> None:
    text = VALID + "\n[engine]\nheartbeat_s = 0.5\ncommit_batch = 64\nscoring_workers = 2\n"
    tuning = load_config(write(tmp_path, text)).engine
    assert (tuning.heartbeat_s, tuning.commit_batch, tuning.scoring_workers) == (0.5, 64, 2)
    # The engine takes its tuning from the config alone (no defaults of its own); the
    # scoring pool, also built by hand in benchmarks, picks its workers the same way.
    defaults = EngineSection()
    assert (
        defaults.scoring_workers is inspect.signature(ScoringPool).parameters["max_workers"].default
    )
    assert defaults.max_upload_bytes == 512 * 1024 * 1024


def test_every_provider_kind_of_the_config_has_an_adapter() -> None:
    kinds = typing.get_args(ModelConfig.model_fields["provider"].annotation)
    assert set(kinds) == set(PROVIDER_BUILDERS)


def test_a_provider_kind_without_an_adapter_is_a_config_error() -> None:
    model = ModelConfig.model_construct(id="m", provider="anthropic", max_concurrency=4)
    with pytest.raises(ConfigError, match=r"models\[m\]\.provider: no adapter for provider"):
        build_provider(model)
