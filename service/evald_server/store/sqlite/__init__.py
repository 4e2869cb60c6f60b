"""The SQLite dialect: the embedded store, one file, one process (``SqliteStore``).

Its modules mirror ``store.postgres`` by name (``_store``, ``_runs``, ``_work``,
``_reads``, ``_datasets``, ``_cache``, ``_schema``, ``_common``), keep only SQL text
and I/O on the store's threads, and call the planners of ``store._plans``,
``store._claims`` and ``store._outcomes``; ``_db_thread`` and ``_store_file`` (the
lock) are SQLite's own.
"""

from evald_server.store.sqlite._schema import LATEST_VERSION, migrate, schema_version
from evald_server.store.sqlite._store import SqliteStore
from evald_server.store.sqlite._store_file import StoreLocked, StoreLost

__all__ = [
    "LATEST_VERSION",
    "SqliteStore",
    "StoreLocked",
    "StoreLost",
    "migrate",
    "schema_version",
]
