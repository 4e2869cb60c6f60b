"""The change feed: ``LISTEN`` on one dedicated connection, notices turned into
``StoreChange``s for the engine, this process's own notices skipped.

Notices are small (``_common.notice``) and coalesced while the engine is busy: the
feed keeps at most one pending change per (kind, run, task), and for a run's events
only the highest seq, so a burst of commits costs the consumer one wake-up. When the
listening connection is lost, notices may have been missed: after reconnecting the
feed yields ``RESYNC``, and the engine looks at the store again.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg

from evald_server.store._records import ChangeKind, StoreChange
from evald_server.store.postgres._common import CHANNEL

_log = logging.getLogger("evald.store")

Connect = Callable[[], Awaitable[asyncpg.Connection]]


class ChangeFeed:
    def __init__(self, owner: str, connect: Connect) -> None:
        self._owner = owner
        self._connect = connect
        self._conn: asyncpg.Connection | None = None
        self._pending: dict[tuple[ChangeKind, str, str], StoreChange] = {}
        self._arrived = asyncio.Event()
        self.notices = 0  # notices received from other processes (bench, tests)

    async def start(self) -> None:
        conn = await self._connect()
        await conn.add_listener(CHANNEL, self._on_notice)
        self._conn = conn

    def alive(self) -> bool:
        return self._conn is not None and not self._conn.is_closed()

    async def reconnect(self) -> None:
        """Listen again on a fresh connection, and tell the consumer to resync."""
        await self.close()
        await self.start()
        self._put(StoreChange(ChangeKind.RESYNC))

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):  # closing a connection that died
                await conn.close(timeout=2)

    def _on_notice(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        parts = payload.split(" ")
        if len(parts) < 3 or parts[1] == self._owner:
            return
        try:
            kind = ChangeKind(parts[0])
        except ValueError:
            _log.warning("unknown store notice %r", payload[:80])
            return
        self.notices += 1
        detail = parts[3] if len(parts) > 3 else ""
        change = StoreChange(kind, parts[2], detail)
        key: tuple[ChangeKind, str, str] = (kind, change.run_id, detail)
        if kind is ChangeKind.EVENTS:
            key = (kind, change.run_id, "")
            old = self._pending.get(key)
            if old is not None and int(old.detail) >= int(detail):
                return
        self._put(change, key)

    def _put(self, change: StoreChange, key: tuple[ChangeKind, str, str] | None = None) -> None:
        self._pending[key or (change.kind, change.run_id, change.detail)] = change
        self._arrived.set()

    async def changes(self) -> AsyncIterator[StoreChange]:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            batch, self._pending = list(self._pending.values()), {}
            for change in batch:
                yield change
