"""The response cache on PostgreSQL: complete answers by (scope, key), with a TTL and a
bound, shared by every replica.

A lookup is a write: it stamps ``used_at`` (and counts the hit) of what it found, so
eviction beyond the bound drops the least recently used entries first. Expired entries
are never served and are deleted when new ones are put. Puts of several replicas are
ordered by one advisory lock, so the bound is enforced on what they all wrote.
"""

from collections.abc import Sequence

import asyncpg

from evald_server.store._plans import EVICTION_ORDER, cache_rows
from evald_server.store._records import CachedAnswer, CacheEntry
from evald_server.store._rows import CACHED_COLUMNS, cached_from
from evald_server.store.postgres._common import clean_text

_CACHE_LOCK = 0x65766163  # "evac": orders the replicas' puts and evictions


async def cache_lookup(
    conn: asyncpg.Connection, scope: str, keys: Sequence[str], now: float, ttl_s: float
) -> dict[str, CachedAnswer]:
    if not keys:
        return {}
    rows = await conn.fetch(
        "UPDATE response_cache SET used_at = $1, hits = hits + 1 "
        "WHERE scope = $2 AND key = ANY($3::text[]) AND created_at > $4 "
        f"RETURNING {CACHED_COLUMNS}",
        now,
        scope,
        sorted(set(keys)),  # key order: concurrent lookups lock rows in the same order
        now - ttl_s,
    )
    return cached_from(rows)


async def cache_put(
    conn: asyncpg.Connection,
    entries: Sequence[CacheEntry],
    now: float,
    ttl_s: float,
    max_entries: int,
) -> int:
    """Keep the entries (a newer answer replaces an older one under the same key), drop
    expired ones and the least recently used beyond ``max_entries``; returns how many
    were evicted."""
    rows = [
        (scope, key, clean_text(output), clean_text(finish), *rest)
        for scope, key, output, finish, *rest in cache_rows(entries, now)
    ]
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _CACHE_LOCK)
        if rows:
            await conn.executemany(
                "INSERT INTO response_cache (scope, key, output, finish_reason, "
                "prompt_tokens, completion_tokens, created_at, used_at) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (scope, key) DO UPDATE "
                "SET output = EXCLUDED.output, finish_reason = EXCLUDED.finish_reason, "
                "prompt_tokens = EXCLUDED.prompt_tokens, "
                "completion_tokens = EXCLUDED.completion_tokens, "
                "created_at = EXCLUDED.created_at, used_at = EXCLUDED.used_at, hits = 0",
                rows,
            )
        expired = await conn.fetchval(
            "WITH gone AS (DELETE FROM response_cache WHERE created_at <= $1 RETURNING 1) "
            "SELECT COUNT(*) FROM gone",
            now - ttl_s,
        )
        over = await conn.fetchval(
            "WITH gone AS (DELETE FROM response_cache WHERE (scope, key) IN (SELECT scope, key "
            f"FROM response_cache ORDER BY {EVICTION_ORDER} OFFSET $1) RETURNING 1) "
            "SELECT COUNT(*) FROM gone",
            max_entries,
        )
    return int(expired) + int(over)


async def cache_size(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT COUNT(*) FROM response_cache"))
