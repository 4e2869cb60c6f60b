"""Shared fixtures: async tests run on asyncio (grpc.aio and aiohttp need it).

Session scope, so that a module- or session-scoped async fixture (one server for a
whole table of cases) may use it too."""

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"
