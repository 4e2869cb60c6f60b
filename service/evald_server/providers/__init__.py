"""Model providers: the port the engine calls, and its two adapters.

``build_provider`` turns one ``[[models]]`` entry into a ``Provider``:

* ``openai``: any OpenAI-compatible ``/v1/chat/completions`` server over aiohttp;
* ``simulated``: a deterministic simulator for the demo and load tests.

Failures are ``ProviderFailure`` carrying a ``RetryDecision`` (see
``classify_status`` for the table).

``OpenAIProvider`` (and with it aiohttp, ~18 MB resident) is imported on first use:
the scoring workers import this package for ``ChatMessage`` through the prompts and
never make a call.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from evald_server.config import ConfigError, ModelConfig
from evald_server.providers._base import (
    Completion,
    ContinuationAnswer,
    ContinuationRequest,
    LoglikelihoodProvider,
    Provider,
    ProviderFailure,
    ProviderRequest,
    RetryDecision,
    RetryKind,
)
from evald_server.providers._echo import MAX_ECHO_TOKENS
from evald_server.providers._openai_wire import chat_url, completions_url
from evald_server.providers._rate_limit_headers import (
    RateLimitInfo,
    parse_duration,
    parse_rate_limit_headers,
)
from evald_server.providers._retry_classification import classify_status, parse_retry_after
from evald_server.providers._simulated import SimulatedProvider

if TYPE_CHECKING:
    from evald_server.providers._openai import OpenAIProvider

__all__ = [
    "MAX_ECHO_TOKENS",
    "PROVIDER_BUILDERS",
    "Completion",
    "ContinuationAnswer",
    "ContinuationRequest",
    "LoglikelihoodProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderFailure",
    "ProviderRequest",
    "RateLimitInfo",
    "RetryDecision",
    "RetryKind",
    "SimulatedProvider",
    "build_provider",
    "chat_url",
    "classify_status",
    "completions_url",
    "parse_duration",
    "parse_rate_limit_headers",
    "parse_retry_after",
]


def __getattr__(name: str) -> Any:
    if name == "OpenAIProvider":
        from evald_server.providers._openai import OpenAIProvider

        return OpenAIProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _openai(model: ModelConfig, pool_size: int) -> Provider:
    from evald_server.providers._openai import OpenAIProvider

    return OpenAIProvider(model, pool_size=pool_size)


def _simulated(model: ModelConfig, pool_size: int) -> Provider:
    return SimulatedProvider(model)


# Every provider kind a model may name (``[[models]] provider``), and how it is built; a
# test keeps these keys equal to the config's choices, so a kind added to the config
# without an adapter here fails there rather than running something else.
PROVIDER_BUILDERS: dict[str, Callable[[ModelConfig, int], Provider]] = {
    "openai": _openai,
    "simulated": _simulated,
}


def build_provider(model: ModelConfig, *, pool_size: int | None = None) -> Provider:
    """The provider for ``model``; ``pool_size`` (connections) defaults to its max_concurrency.

    Raises ``ConfigError`` when the model's ``api_key_env`` names an unset variable, or
    its provider kind has no adapter.
    """
    builder = PROVIDER_BUILDERS.get(model.provider)
    if builder is None:
        raise ConfigError(
            f"models[{model.id}].provider: no adapter for provider {model.provider!r} "
            f"(known: {', '.join(sorted(PROVIDER_BUILDERS))})"
        )
    return builder(model, model.max_concurrency if pool_size is None else pool_size)
