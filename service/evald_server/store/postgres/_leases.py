"""Membership and leases: who is alive, and what a dead replica's work goes back to.

Each replica has one ``replicas`` row: its replica id, the claim owner of this process
(replica id + a per-start nonce, so a restarted replica never mistakes its previous
life's rows for its own), and ``lease_until`` on the *database's* clock (replicas' clocks
may disagree; the database's is the one they share). The heartbeat renews that one row,
and with it the lease on every subtask and scoring job the replica holds: a lease is
valid while its owner's row is. One row per heartbeat, not one per subtask.

A replica whose ``lease_until`` has passed is dead. Any replica then returns its running
subtasks to pending (no retry spent) and frees its scoring jobs; never before, so work
is never taken from an owner that still holds a valid lease.
"""

import json
from collections.abc import Mapping

import asyncpg

from evald_server.store._errors import StoreError
from evald_server.store._records import SharedRate, Shares

DB_NOW = "extract(epoch from clock_timestamp())"
LIVE = f"replicas.lease_until > {DB_NOW}"  # the SQL test of a live membership row


async def register(conn: asyncpg.Connection, replica_id: str, owner: str, lease_s: float) -> None:
    """Insert (or take over, from a dead previous life) this replica's membership row.

    A live row of the same replica id under another owner is another process configured
    with the same ``replica_id``: refused, since the two would take each other's work."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"replica:{replica_id}")
        row = await conn.fetchrow(
            f"SELECT owner, {LIVE} AS live, {DB_NOW} - heartbeat_at AS age FROM replicas "
            "WHERE replica_id = $1",
            replica_id,
        )
        if row is not None and row["live"] and row["owner"] != owner:
            raise StoreError(
                f"replica id {replica_id!r} is in use by a live replica (heartbeat "
                f"{row['age']:.1f} s ago): give each replica its own store.replica_id"
            )
        await conn.execute(
            "INSERT INTO replicas (replica_id, owner, started_at, heartbeat_at, lease_until) "
            f"VALUES ($1, $2, {DB_NOW}, {DB_NOW}, {DB_NOW} + $3) "
            "ON CONFLICT (replica_id) DO UPDATE SET owner = EXCLUDED.owner, "
            "started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at, "
            "lease_until = EXCLUDED.lease_until",
            replica_id,
            owner,
            lease_s,
        )


async def heartbeat(conn: asyncpg.Connection, replica_id: str, owner: str, lease_s: float) -> bool:
    """Renew this replica's lease; False when its row is gone or another owner's (it was
    declared dead meanwhile: the caller registers again)."""
    renewed = await conn.fetchval(
        f"UPDATE replicas SET heartbeat_at = {DB_NOW}, lease_until = {DB_NOW} + $3 "
        "WHERE replica_id = $1 AND owner = $2 RETURNING 1",
        replica_id,
        owner,
        lease_s,
    )
    return renewed is not None


async def live_members(conn: asyncpg.Connection) -> list[tuple[str, str]]:
    """(replica id, owner) of every live replica, in replica id order."""
    rows = await conn.fetch(
        f"SELECT replica_id, owner FROM replicas WHERE {LIVE} ORDER BY replica_id"
    )
    return [(r[0], r[1]) for r in rows]


async def leave(conn: asyncpg.Connection, replica_id: str, owner: str) -> None:
    """This replica stops: its row goes, so the others rebalance at once."""
    await conn.execute(
        "DELETE FROM replicas WHERE replica_id = $1 AND owner = $2", replica_id, owner
    )


async def forget_dead(conn: asyncpg.Connection, after_s: float) -> None:
    """Drop membership rows dead for longer than ``after_s`` (their work is back)."""
    await conn.execute(f"DELETE FROM replicas WHERE lease_until < {DB_NOW} - $1", after_s)


async def orphaned_scoring(conn: asyncpg.Connection, grace_s: float) -> list[tuple[str, str]]:
    """(run id, task id) of tasks waiting in ``scoring`` whose job nobody alive holds:
    its scorer died, or nobody took it within ``grace_s`` (its finisher died first)."""
    rows = await conn.fetch(
        "SELECT run_id, task_id FROM tasks WHERE state = 'scoring' AND ("
        f"(scorer IS NULL AND finished_at < {DB_NOW} - $1) OR (scorer IS NOT NULL AND "
        f"NOT EXISTS (SELECT 1 FROM replicas WHERE replicas.owner = tasks.scorer AND {LIVE})))",
        grace_s,
    )
    return [(r[0], r[1]) for r in rows]


_CAPACITY_LOCK = 0x65766163  # "evac": one balancing of the shares at a time, database-wide
_DEMAND = "@demand:"  # a rate's demand among a replica's published figures
# Of a rate, every replica stating it keeps at least this fraction (over the number of
# them) whatever its demand, so that an idle replica's first calls do not wait for a
# balancing; the rest goes by demand.
IDLE_SHARE = 0.05


def fenced(limits: Mapping[str, int], rates: Mapping[str, SharedRate] | None) -> Shares:
    """No share of anything: this replica is not (or may no longer be) a live member."""
    return Shares(dict.fromkeys(limits, 0), dict.fromkeys(rates or {}, 0.0))


def rate_share(rate: SharedRate, others_held: float, others_demand: float, n: int) -> float:
    """A replica's share of a rate among ``n`` live replicas, weighted by demand:
    ``limit × (demand + ε·D/n) / (D·(1 + ε))``, D the demand summed over them and ε
    ``IDLE_SHARE``; ``limit / n`` when none wants any. Capped at what the others do not
    hold, like a concurrency share."""
    total = rate.demand + others_demand
    if total <= 0:
        weight = 1.0 / n
    else:
        weight = (rate.demand + IDLE_SHARE * total / n) / (total * (1.0 + IDLE_SHARE))
    return max(0.0, min(rate.limit * weight, rate.limit - others_held))


async def capacity_shares(
    conn: asyncpg.Connection,
    replica_id: str,
    owner: str,
    limits: Mapping[str, int],
    held: Mapping[str, int],
    rates: Mapping[str, SharedRate] | None = None,
    published: Mapping[str, float] | None = None,
) -> Shares:
    """This replica's share of each model's global limit and rate; publish what it holds.

    Concurrency, fair share: ``limit // n``, one more for the first ``limit % n``
    replicas (replica id order), so the shares add up to the limit. Rates (requests or
    tokens a minute), by demand (``rate_share``). A share is also capped at what the
    other live replicas do not hold (``limit - Σ their published holds``): a share taken
    from a replica is free only once that replica has said it no longer uses it (its
    calls in flight have come back under its new share, its budget refills at the new
    rate), or once its lease has expired. Balancing runs under one advisory lock, so
    each replica sees the others' latest holds; every replica publishes at least what it
    may use, so the holds never add up above a limit.

    A replica's ``capacity`` row is one JSON object of numbers: its hold of each limit
    and rate, each rate's demand (``@demand:`` + key) and the figures it ``published``;
    the others' are summed key by key (``Shares.peers``).
    """
    rates = rates or {}
    published = published or {}
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _CAPACITY_LOCK)
        rows = await conn.fetch(
            f"SELECT replica_id, owner, capacity FROM replicas WHERE {LIVE} ORDER BY replica_id"
        )
        ids = [r["replica_id"] for r in rows]
        others: dict[str, float] = {}
        for row in rows:
            if row["replica_id"] != replica_id:
                for key, value in json.loads(row["capacity"]).items():
                    others[key] = others.get(key, 0.0) + float(value)
        if (replica_id, owner) not in [(r["replica_id"], r["owner"]) for r in rows]:
            shares = fenced(limits, rates)  # not a live member (taken for dead)
        else:
            rank, n = ids.index(replica_id), len(ids)
            slots = {}
            for model, limit in limits.items():
                fair = limit // n + (1 if rank < limit % n else 0)
                slots[model] = max(0, min(fair, limit - int(others.get(model, 0))))
            shared = {
                key: rate_share(rate, others.get(key, 0.0), others.get(_DEMAND + key, 0.0), n)
                for key, rate in rates.items()
            }
            shares = Shares(slots, shared, {k: others.get(k, 0.0) for k in published}, n)
        holds: dict[str, float] = {m: max(shares.slots[m], held.get(m, 0)) for m in limits}
        for key, rate in rates.items():
            holds[key] = max(shares.rates[key], rate.held)
            holds[_DEMAND + key] = rate.demand
        holds |= published
        await conn.execute(
            "UPDATE replicas SET capacity = $3 WHERE replica_id = $1 AND owner = $2",
            replica_id,
            owner,
            json.dumps(holds, sort_keys=True),
        )
    return shares
