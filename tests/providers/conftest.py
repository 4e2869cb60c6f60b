"""A fake provider on 127.0.0.1 port 0 per test, and request helpers."""

from collections.abc import AsyncIterator

import pytest

from evald_server.config import GenerationParams
from evald_server.domain import ChatMessage
from evald_server.fake_provider import FakeProvider
from evald_server.providers import ProviderRequest


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with FakeProvider() as server:
        yield server


def make_request(
    key: str, text: str = "What is the capital of France?", **params: object
) -> ProviderRequest:
    return ProviderRequest(
        messages=(ChatMessage("system", "Answer briefly."), ChatMessage("user", text)),
        params=GenerationParams.model_validate(params),
        request_key=key,
    )
