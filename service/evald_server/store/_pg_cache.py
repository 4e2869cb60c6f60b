"""The response cache on PostgreSQL: complete answers by (scope, key), with a TTL and a
bound, shared by every replica (``_sql_cache`` is SQLite's).

A lookup is a write: it stamps ``used_at`` (and counts the hit) of what it found, so
eviction beyond the bound drops the least recently used entries first. Expired entries
are never served and are deleted when new ones are put. Puts of several replicas are
ordered by one advisory lock, so the bound is enforced on what they all wrote.
"""

from collections.abc import Sequence

import asyncpg

from evald_server.store._pg_common import clean_text
from evald_server.store._records import CachedAnswer, CacheEntry

_CACHE_LOCK = 0x65766163  # "evac": orders the replicas' puts and evictions


async def cache_lookup(
    conn: asyncpg.Connection, scope: str, keys: Sequence[str], now: float, ttl_s: float
) -> dict[str, CachedAnswer]:
    if not keys:
        return {}
    rows = await conn.fetch(
        "UPDATE response_cache SET used_at = $1, hits = hits + 1 "
        "WHERE scope = $2 AND key = ANY($3::text[]) AND created_at > $4 "
        "RETURNING key, output, finish_reason, prompt_tokens, completion_tokens",
        now,
        scope,
        sorted(set(keys)),  # key order: concurrent lookups lock rows in the same order
        now - ttl_s,
    )
    return {r[0]: CachedAnswer(r[1], r[2], r[3], r[4]) for r in rows}


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
    latest = {(e.scope, e.key): e for e in entries}  # one row per key, the last one wins
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _CACHE_LOCK)
        if latest:
            await conn.executemany(
                "INSERT INTO response_cache (scope, key, output, finish_reason, "
                "prompt_tokens, completion_tokens, created_at, used_at) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $7) ON CONFLICT (scope, key) DO UPDATE "
                "SET output = EXCLUDED.output, finish_reason = EXCLUDED.finish_reason, "
                "prompt_tokens = EXCLUDED.prompt_tokens, "
                "completion_tokens = EXCLUDED.completion_tokens, "
                "created_at = EXCLUDED.created_at, used_at = EXCLUDED.used_at, hits = 0",
                [
                    (
                        e.scope,
                        e.key,
                        clean_text(e.answer.output),
                        clean_text(e.answer.finish_reason),
                        e.answer.prompt_tokens,
                        e.answer.completion_tokens,
                        now,
                    )
                    for _, e in sorted(latest.items())
                ],
            )
        expired = await conn.fetchval(
            "WITH gone AS (DELETE FROM response_cache WHERE created_at <= $1 RETURNING 1) "
            "SELECT COUNT(*) FROM gone",
            now - ttl_s,
        )
        over = await conn.fetchval(
            "WITH gone AS (DELETE FROM response_cache WHERE (scope, key) IN (SELECT scope, key "
            "FROM response_cache ORDER BY used_at DESC, key OFFSET $1) RETURNING 1) "
            "SELECT COUNT(*) FROM gone",
            max_entries,
        )
    return int(expired) + int(over)


async def cache_size(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT COUNT(*) FROM response_cache"))
