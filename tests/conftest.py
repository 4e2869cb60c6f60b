"""Shared fixtures: async tests run on asyncio (grpc.aio and aiohttp need it).

Session scope, so that a module- or session-scoped async fixture (one server for a
whole table of cases) may use it too."""

import pytest


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _no_inherited_terminal_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI sizes its tables by ``COLUMNS`` when it is set; pytest-xdist's workers
    inherit ``COLUMNS=80`` from execnet, which would wrap paths and cut ids that a
    plain run prints whole. Tests that want a width set it themselves."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
