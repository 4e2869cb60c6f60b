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


MIXED_KEY = "sk-Evald-AbCdEf0123456789-MiXeD-Key"
ECHOES = {
    # A gateway that lower-cases what it echoes.
    "lower": f"invalid credentials {MIXED_KEY.lower()}",
    "upper": f"INVALID CREDENTIALS {MIXED_KEY.upper()}",
    # The key straddles the 200-character excerpt cut: cutting first kept its prefix.
    "straddle": "x" * 185 + MIXED_KEY,
    # Only a piece of the key, as a gateway's own truncation leaves it.
    "partial": f"key ending {MIXED_KEY[-12:]} rejected",
    # The echoed header, whatever key it carries.
    "bearer": "got Authorization: Bearer sk-other-9f8e7d6c5b4a3210 from you",
    "api-key": 'headers {"api-key": "azure-0123456789abcdef"}',
}


@pytest.mark.parametrize("echo", sorted(ECHOES))
@pytest.mark.parametrize("where", ["error", "answer"])
async def test_echoed_key_fragments_are_scrubbed_in_any_case_before_cutting(
    fake: FakeProvider,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    echo: str,
    where: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(ENV, MIXED_KEY)
    text = ECHOES[echo]
    if where == "error":
        fake.script_key("k", Behaviour.error(400, message=text))
    else:
        fake.script_key("k", Behaviour.ok(answer=text))
    provider = build_provider(fake.model_config("m1", api_key_env=ENV))
    try:
        if where == "error":
            with pytest.raises(ProviderFailure) as caught:
                await provider.complete(make_request("k"))
            shown = [caught.value.message, str(caught.value.error.to_json())]
        else:
            shown = [(await provider.complete(make_request("k"))).text]
    finally:
        await provider.aclose()
    shown += [record.getMessage() for record in caplog.records]
    assert "<redacted>" in shown[0]
    secrets = [MIXED_KEY, "sk-other-9f8e7d6c5b4a3210", "azure-0123456789abcdef"]
    for piece in (s[i : i + 8].lower() for s in secrets for i in range(len(s) - 7)):
        for text_shown in shown:
            assert piece not in text_shown.lower(), (piece, text_shown)


async def test_credentials_in_the_base_url_are_not_shown_in_errors() -> None:
    async with FakeProvider() as gone:
        port = gone.base_url.rsplit(":", 1)[1]
    model = ModelConfig(
        id="m1",
        provider="openai",
        base_url=f"http://operator:sekret-pass-0123@127.0.0.1:{port}",
        timeout_s=5.0,
    )
    provider = build_provider(model)
    try:
        with pytest.raises(ProviderFailure) as caught:
            await provider.complete(make_request("k"))
    finally:
        await provider.aclose()
    assert caught.value.reason is ErrorReason.PROVIDER_CONNECTION_ERROR
    assert f"http://127.0.0.1:{port}/v1/chat/completions" in caught.value.message
    assert "sekret" not in caught.value.message
    assert "operator" not in caught.value.message
