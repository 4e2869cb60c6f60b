"""One server per SQLite store, and a store file that cannot vanish unnoticed.

``StoreFileGuard`` takes an exclusive OS lock (``flock``) on ``<store>.lock`` before
the store is opened and holds it for the server's life; the kernel drops it when the
process dies, however it dies. A second server on the same file is refused at start
with the holder's pid, host and start time, which the holder wrote into the lock file.

It also remembers the store file's identity (device, inode). A file deleted or
replaced while the server runs would otherwise keep taking writes into an unlinked
inode, all of it gone at the next start; ``verify`` notices (a ``stat`` per call) and
``StoreLost`` is raised from then on.

Read-only files and directories are refused up front with a one-line reason.
"""

import fcntl
import json
import logging
import os
import socket
import time
from pathlib import Path

from evald_server.store._errors import StoreError

_log = logging.getLogger("evald.store")


class StoreLocked(StoreError):
    """Another process (another evald server) holds the store's lock."""


class StoreLost(StoreError):
    """The store file was deleted or replaced while the server ran: writes are refused."""


class StoreFileGuard:
    """The lock on a store and the identity of its file; ``acquire`` first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self.lost: str | None = None  # why the store is lost, once it is

    def acquire(self) -> None:
        """Lock the store or raise ``StoreLocked`` (naming the holder) or ``StoreError``."""
        _check_writable(self.path)
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreError(
                f"cannot create the store lock {self.lock_path}: {exc.strerror}"
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StoreLocked(
                f"the store {self.path} is in use by another evald server ({holder}); "
                "one server per SQLite store: stop that one, or give this one another "
                "store.url"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, _holder_record().encode())
        self._fd = fd

    def remember_identity(self) -> None:
        """Record the store file's (device, inode), once the file exists."""
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)

    def verify(self) -> None:
        """``StoreLost`` if the store file is gone or is another file than at start."""
        if self.lost is not None:
            raise StoreLost(self.lost)
        if self._identity is None:
            return
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._lose("was deleted")
        else:
            if (st.st_dev, st.st_ino) != self._identity:
                self._lose("was replaced by another file")

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops the flock

    def _lose(self, what: str) -> None:
        self.lost = (
            f"the store file {self.path} {what} while the server ran; writes are refused "
            "(they would be lost at the next start): restore the file or restart the server"
        )
        _log.error("STORE LOST: %s", self.lost)  # once: later calls raise without logging
        raise StoreLost(self.lost)


def _check_writable(path: Path) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise StoreError(f"the store directory {directory} does not exist")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise StoreError(
            f"the store directory {directory} is read-only: SQLite needs to create "
            f"{path.name}-wal and {path.name}-shm beside the store"
        )
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise StoreError(f"the store file {path} is read-only (or unreadable) for this user")


def _holder_record() -> str:
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": started})


def _read_holder(fd: int) -> str:
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {data['pid']} on {data['host']}, since {data['since']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"
