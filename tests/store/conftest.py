"""The store conformance suite's fixture: every test of ``tests/store`` that takes
``store`` runs against each backend here. A second backend (PostgreSQL) adds its
opener to ``BACKENDS`` and must pass the same tests."""

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from evald_server.store import SqliteStore, Store

EVENTS_RETAINED = 100

StoreOpener = Callable[[Path], Awaitable[Store]]


async def _sqlite(tmp_path: Path) -> Store:
    return await SqliteStore.open(
        tmp_path / "evald.sqlite3", events_retained_per_run=EVENTS_RETAINED
    )


BACKENDS: dict[str, StoreOpener] = {"sqlite": _sqlite}


@pytest.fixture(params=sorted(BACKENDS))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    opened = await BACKENDS[request.param](tmp_path)
    yield opened
    await opened.close()
