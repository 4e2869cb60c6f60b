"""Shared fixtures: async tests run on asyncio (grpc.aio and aiohttp need it)."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
