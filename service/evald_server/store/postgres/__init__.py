"""The PostgreSQL dialect: N replicas on one database (``PostgresStore``). Imported only
when a ``postgresql://`` URL is opened: its driver, asyncpg, is the ``postgres`` extra.

Its modules mirror ``store.sqlite`` by name (``_store``, ``_runs``, ``_work``,
``_reads``, ``_datasets``, ``_cache``, ``_schema``, ``_common``), keep only SQL text
and I/O (async, on pooled connections), and call the planners of ``store._plans``,
``store._claims`` and ``store._outcomes``; ``_leases`` (membership, shares) and
``_feed`` (LISTEN/NOTIFY) are its own.
"""

from evald_server.store.postgres._schema import LATEST_VERSION, migrate, schema_version
from evald_server.store.postgres._store import PostgresStore, redact

__all__ = ["LATEST_VERSION", "PostgresStore", "migrate", "redact", "schema_version"]
