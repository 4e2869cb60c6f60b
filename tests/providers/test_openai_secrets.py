"""The API key is sent as a bearer token and appears nowhere else."""

import logging

import pytest

from evald_server.config import ConfigError, ModelConfig
from evald_server.domain import ErrorReason
from evald_server.fake_provider import Behaviour, FakeProvider
from evald_server.providers import OpenAIProvider, ProviderFailure, build_provider

from .conftest import make_request

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789-very-secret"
ENV = "EVALD_TEST_PROVIDER_KEY"


async def test_key_is_sent_but_never_shown(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, aiohttp's included
    monkeypatch.setenv(ENV, KEY)
    fake.configure(api_key=KEY)
    # A gateway that echoes the key in its error body must not leak it either.
    fake.script_key("echo", Behaviour.error(400, message=f"bad request with key {KEY}"))
    provider = build_provider(fake.model_config("m1", api_key_env=ENV))
    failures: list[ProviderFailure] = []
    try:
        assert (await provider.complete(make_request("ok"))).text  # the fake checked the key
        with pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("echo"))
        failures.append(caught.value)
        fake.configure(api_key="sk-another-key")
        with pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("wrong"))
        failures.append(caught.value)
        fake.script_key("hang", Behaviour.reset())
        with pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("hang"))
        failures.append(caught.value)
    finally:
        await provider.aclose()

    assert failures[0].reason is ErrorReason.PROVIDER_REJECTED
    assert "<redacted>" in failures[0].message
    assert failures[1].reason is ErrorReason.PROVIDER_AUTH_FAILED
    shown = [repr(provider), str(provider), repr(vars(provider))]
    for failure in failures:
        shown += [str(failure), failure.message, repr(failure.error), str(failure.error.to_json())]
        if failure.__cause__ is not None:
            shown += [str(failure.__cause__), repr(failure.__cause__)]
    shown += [record.getMessage() for record in caplog.records]
    assert caplog.records  # the failures were logged (at debug), so the scan means something
    for text in shown:
        assert KEY not in text


def test_missing_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    model = ModelConfig(id="m1", provider="openai", base_url="http://127.0.0.1:9", api_key_env=ENV)
    with pytest.raises(ConfigError, match=f"models\\[m1\\].api_key_env: .*{ENV}"):
        OpenAIProvider(model, pool_size=1)
    monkeypatch.setenv(ENV, "  ")
    with pytest.raises(ConfigError, match="not set or empty"):
        build_provider(model)
