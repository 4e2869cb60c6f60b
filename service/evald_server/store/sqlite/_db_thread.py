"""A thread that owns one SQLite connection and runs blocking calls for the event loop.

SQLite work never runs on the event loop: every call is handed to the thread that owns
the connection (one connection per thread, as sqlite3 wants), executed in submission
order, and its result handed back to the awaiting task. Awaiting is shielded from
cancellation: once a write is submitted, its caller always learns whether it committed.

The bridge uses the running asyncio loop's ``call_soon_threadsafe``; the whole server
runs anyio on the asyncio backend (grpc.aio and aiohttp need it).
"""

import asyncio
import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from evald_server.store._errors import StoreError

T = TypeVar("T")

_Job = tuple[Callable[..., Any], tuple[Any, ...], "asyncio.Future[Any]", asyncio.AbstractEventLoop]


class DbThread:
    """One named thread, one connection, calls run in order."""

    def __init__(self, name: str, connect: Callable[[], sqlite3.Connection]) -> None:
        self._name = name
        self._connect = connect
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._conn: sqlite3.Connection | None = None
        self._closed = False

    async def start(self) -> None:
        """Start the thread and open its connection (errors surface here)."""
        self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
        self._thread.start()
        await self.call(self._open)

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` on the thread; return its result or raise its error."""
        if self._closed:
            raise StoreError("the store is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, args, future, loop))
        with anyio.CancelScope(shield=True):
            await asyncio.wait((future,))
        return future.result()

    async def close(self) -> None:
        """Finish queued calls, close the connection and join the thread."""
        thread = self._thread
        self._closed = True
        if thread is None:
            return
        self._thread = None
        self._jobs.put(None)
        await anyio.to_thread.run_sync(thread.join)
        while True:  # calls that raced with close never ran: tell their callers
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None and not job[2].done():
                job[2].set_exception(StoreError("the store is closed"))

    def _open(self, _conn: sqlite3.Connection | None) -> None:
        self._conn = self._connect()

    def _main(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            fn, args, future, loop = job
            try:
                result = fn(self._conn, *args)
            except BaseException as exc:  # handed to the awaiting task, never lost
                _deliver(loop, future, None, exc)
            else:
                _deliver(loop, future, result, None)
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _deliver(
    loop: asyncio.AbstractEventLoop,
    future: "asyncio.Future[Any]",
    result: Any,
    exc: BaseException | None,
) -> None:
    def settle() -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)

    # A closed loop means nobody is waiting any more.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(settle)
