"""Which store a URL opens: one opener per scheme.

``config.STORE_SCHEMES`` lists the same schemes (a test keeps them equal), so a URL the
configuration accepts always has a store here.
"""

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from evald_server.store._errors import StoreError
from evald_server.store._port import Store
from evald_server.store.sqlite import SqliteStore

StoreOpener = Callable[..., Awaitable[Store]]


async def _sqlite(url: str, *, events_retained_per_run: int, **_replicas: Any) -> Store:
    return await SqliteStore.from_url(url, events_retained_per_run=events_retained_per_run)


async def _postgresql(url: str, *, events_retained_per_run: int, **replicas: Any) -> Store:
    try:  # the driver is an extra: pip install 'evald[postgres]'
        from evald_server.store.postgres import PostgresStore
    except ImportError as missing:
        raise StoreError(
            f"store.url is a PostgreSQL URL but its driver is not installed ({missing.name}): "
            "pip install 'evald[postgres]'"
        ) from None
    return await PostgresStore.from_url(
        url, events_retained_per_run=events_retained_per_run, **replicas
    )


STORE_OPENERS: Mapping[str, StoreOpener] = {
    "sqlite": _sqlite,
    "postgresql": _postgresql,
    "postgres": _postgresql,
}


async def open_store(url: str, *, events_retained_per_run: int, **replicas: Any) -> Store:
    """Open the store ``url`` names (``sqlite:///path`` or ``postgresql://…``);
    ``replicas``: PostgreSQL's pool size, replica id and lease settings."""
    scheme = url.split("://", 1)[0]
    opener = STORE_OPENERS.get(scheme)
    if opener is None:
        raise StoreError(f"store.url: no store for the scheme {scheme!r} in this build")
    return await opener(url, events_retained_per_run=events_retained_per_run, **replicas)
