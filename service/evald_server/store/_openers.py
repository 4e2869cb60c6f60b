"""Which store a URL opens: one opener per scheme.

``config.STORE_SCHEMES`` lists the same schemes (a test keeps them equal), so a URL the
configuration accepts always has a store here.
"""

from collections.abc import Awaitable, Callable, Mapping

from evald_server.store._errors import StoreError
from evald_server.store._port import Store
from evald_server.store._sqlite import SqliteStore

StoreOpener = Callable[..., Awaitable[Store]]


async def _sqlite(url: str, *, events_retained_per_run: int) -> Store:
    return await SqliteStore.from_url(url, events_retained_per_run=events_retained_per_run)


STORE_OPENERS: Mapping[str, StoreOpener] = {"sqlite": _sqlite}


async def open_store(url: str, *, events_retained_per_run: int) -> Store:
    """Open the store ``url`` names (``sqlite:///path``)."""
    scheme = url.split("://", 1)[0]
    opener = STORE_OPENERS.get(scheme)
    if opener is None:
        raise StoreError(f"store.url: no store for the scheme {scheme!r} in this build")
    return await opener(url, events_retained_per_run=events_retained_per_run)
