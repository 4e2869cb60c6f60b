"""The store conformance suite's fixtures: every test of ``tests/store`` that takes
``store`` runs against each backend here — SQLite on a file, PostgreSQL on this test
session's database (``tests/_postgres.py``; skipped, saying why, without one).

``reopen`` is a restart: the store closed and a new one opened on the same file or
database (a new process, a new claim owner)."""

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from evald_server.store import SqliteStore, Store
from evald_server.store.postgres import PostgresStore
from tests._postgres import empty, pg_url

__all__ = ["pg_url"]

EVENTS_RETAINED = 100

Opener = Callable[[], Awaitable[Store]]


async def _sqlite(request: pytest.FixtureRequest) -> Opener:
    path = request.getfixturevalue("tmp_path") / "evald.sqlite3"
    return lambda: SqliteStore.open(path, events_retained_per_run=EVENTS_RETAINED)


async def _postgresql(request: pytest.FixtureRequest) -> Opener:
    url = request.getfixturevalue("pg_url")
    await empty(url)
    return lambda: PostgresStore.open(url, events_retained_per_run=EVENTS_RETAINED, pool_size=4)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest], Awaitable[Opener]]] = {
    "sqlite": _sqlite,
    "postgresql": _postgresql,
}


class Stores:
    """The stores a test opened on its backend, all closed at its end."""

    def __init__(self, opener: Opener) -> None:
        self._opener = opener
        self.opened: list[Store] = []

    async def open(self) -> Store:
        store = await self._opener()
        self.opened.append(store)
        return store

    async def reopen(self, store: Store) -> Store:
        await store.close()
        return await self.open()


@pytest.fixture(params=sorted(BACKENDS))
async def stores(request: pytest.FixtureRequest) -> AsyncIterator[Stores]:
    opened = Stores(await BACKENDS[request.param](request))
    yield opened
    for store in reversed(opened.opened):
        await store.close()


@pytest.fixture
async def store(stores: Stores) -> Store:
    return await stores.open()


@pytest.fixture
def reopen(stores: Stores) -> Callable[[Store], Awaitable[Store]]:
    return stores.reopen
