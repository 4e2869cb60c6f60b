"""The response cache in SQL: complete answers by (scope, key), with a TTL and a bound.

A lookup is a write: it stamps ``used_at`` (and counts the hit) of what it found, so
eviction beyond the bound drops the least recently used entries first. Expired entries
are never served and are deleted when new ones are put.
"""

import sqlite3
from collections.abc import Sequence

from evald_server.store._records import CachedAnswer, CacheEntry
from evald_server.store._sql_common import transaction

_BATCH = 500  # keys per IN (...) list, under SQLite's default variable limit


def cache_lookup(
    conn: sqlite3.Connection, scope: str, keys: Sequence[str], now: float, ttl_s: float
) -> dict[str, CachedAnswer]:
    found: dict[str, CachedAnswer] = {}
    with transaction(conn):
        for start in range(0, len(keys), _BATCH):
            part = list(keys[start : start + _BATCH])
            marks = ",".join("?" * len(part))
            rows = conn.execute(
                "UPDATE response_cache SET used_at = ?, hits = hits + 1 "
                f"WHERE scope = ? AND key IN ({marks}) AND created_at > ? "
                "RETURNING key, output, finish_reason, prompt_tokens, completion_tokens",
                [now, scope, *part, now - ttl_s],
            ).fetchall()
            for key, output, finish_reason, prompt_tokens, completion_tokens in rows:
                found[key] = CachedAnswer(output, finish_reason, prompt_tokens, completion_tokens)
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
            [
                (
                    e.scope,
                    e.key,
                    e.answer.output,
                    e.answer.finish_reason,
                    e.answer.prompt_tokens,
                    e.answer.completion_tokens,
                    now,
                    now,
                )
                for e in entries
            ],
        )
        expired = conn.execute(
            "DELETE FROM response_cache WHERE created_at <= ?", (now - ttl_s,)
        ).rowcount
        over = conn.execute(
            "DELETE FROM response_cache WHERE (scope, key) IN (SELECT scope, key "
            "FROM response_cache ORDER BY used_at DESC, key LIMIT -1 OFFSET ?)",
            (max_entries,),
        ).rowcount
    return int(expired) + int(over)


def cache_size(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM response_cache").fetchone()[0])
