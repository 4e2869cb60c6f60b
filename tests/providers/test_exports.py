"""Pin the public surface of the providers and fake_provider packages."""

import evald_server.fake_provider as fake_provider
import evald_server.providers as providers


def test_providers_exports() -> None:
    assert sorted(providers.__all__) == [
        "ChatMessage",
        "Completion",
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
        "parse_duration",
        "parse_rate_limit_headers",
        "parse_retry_after",
    ]
    for name in providers.__all__:
        assert getattr(providers, name).__module__.startswith("evald_server."), name


def test_fake_provider_exports() -> None:
    assert sorted(fake_provider.__all__) == [
        "AnswerFn",
        "Behaviour",
        "FakeChatRequest",
        "FakeConfig",
        "FakeControl",
        "FakeProcess",
        "FakeProvider",
        "FaultRate",
        "Journal",
        "JournalEntry",
        "Kind",
        "Quota",
    ]
    for name in fake_provider.__all__:
        assert hasattr(fake_provider, name), name
