"""The response cache on SQLite: complete answers by (scope, key), with a TTL and a bound.

A lookup is a write: it stamps ``used_at`` (and counts the hit) of what it found, so
eviction beyond the bound drops the least recently used entries first. Expired entries
are never served and are deleted when new ones are put.
"""

import sqlite3
from collections.abc import Sequence

from evald_server.store._plans import EVICTION_ORDER, cache_rows
from evald_server.store._records import CachedAnswer, CacheEntry
from evald_server.store._rows import CACHED_COLUMNS, cached_from
from evald_server.store.sqlite._common import marks, transaction

_BATCH = 500  # keys per IN (...) list, under SQLite's default variable limit


def cache_lookup(
    conn: sqlite3.Connection, scope: str, keys: Sequence[str], now: float, ttl_s: float
) -> dict[str, CachedAnswer]:
    found: dict[str, CachedAnswer] = {}
    with transaction(conn):
        for start in range(0, len(keys), _BATCH):
            part = list(keys[start : start + _BATCH])
            rows = conn.execute(
                "UPDATE response_cache SET used_at = ?, hits = hits + 1 "
                f"WHERE scope = ? AND key IN ({marks(len(part))}) AND created_at > ? "
                f"RETURNING {CACHED_COLUMNS}",
                [now, scope, *part, now - ttl_s],
            ).fetchall()
            found.update(cached_from(rows))
    return found


def cache_put(
    conn: sqlite3.Connection,
    entries: Sequence[CacheEntry],
    now: float,
    ttl_s: float,
    max_entries: int,
) -> int:
    """Keep the entries (a newer answer replaces an older one under the same key), drop
    expired ones and the least recently used beyond ``max_entries``; returns how many
    were evicted."""
    with transaction(conn):
        conn.executemany(
            "INSERT OR REPLACE INTO response_cache (scope, key, output, finish_reason, "
            "prompt_tokens, completion_tokens, created_at, used_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            cache_rows(entries, now),
        )
        expired = conn.execute(
            "DELETE FROM response_cache WHERE created_at <= ?", (now - ttl_s,)
        ).rowcount
        over = conn.execute(
            "DELETE FROM response_cache WHERE (scope, key) IN (SELECT scope, key "
            f"FROM response_cache ORDER BY {EVICTION_ORDER} LIMIT -1 OFFSET ?)",
            (max_entries,),
        ).rowcount
    return int(expired) + int(over)


def cache_size(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM response_cache").fetchone()[0])
