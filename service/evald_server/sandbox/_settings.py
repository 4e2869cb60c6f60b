"""The sandbox's settings: one frozen dataclass, validated on construction.

Each field is a key of the server configuration's ``[sandbox]`` table (docs/SANDBOX.md
lists them with their defaults). A value out of its bounds raises ``ValueError`` whose
message names the key (``sandbox.cpu_seconds: must be an integer in [1, 600], got 0``).
"""

import math
import posixpath
from dataclasses import dataclass

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# Host paths the sandbox may see, read-only: the interpreter and its libraries. A path
# that is a symlink on the host (merged /usr: /lib -> usr/lib) is recreated as that
# symlink inside; a missing one is skipped.
DEFAULT_SYSTEM_PATHS = ("/usr", "/lib", "/lib64", "/bin", "/sbin")
# Paths the sandbox builds itself and that no system path may cover or shadow.
_SANDBOX_OWN = ("/", "/w", "/tmp", "/dev", "/proc")
_MAX_UID = 2**32 - 2  # (uid_t)-1 is "no change"


def _integer(key: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"sandbox.{key}: must be an integer in [{low}, {high}], got {value!r}")


@dataclass(frozen=True, slots=True)
class SandboxSettings:
    """How code runs: the pool, the limits of one program, and what it may see.

    ``processes`` counts tasks (processes and threads) inside the sandbox, the
    harness's two threads included; ``memory_bytes`` is each process's address space,
    so a program's memory is at most ``processes × memory_bytes`` plus its tmpfs.
    """

    enabled: bool = False
    slots: int = 2  # programs running at once, server-wide
    bwrap: str = "/usr/bin/bwrap"
    python: str = "/usr/bin/python3"  # the interpreter inside; must lie under system_paths
    system_paths: tuple[str, ...] = DEFAULT_SYSTEM_PATHS
    wall_timeout_s: float = 10.0  # start to kill of the whole process tree
    cpu_seconds: int = 5  # per process (RLIMIT_CPU): SIGXCPU, then SIGKILL a second later
    memory_bytes: int = 1 * GiB  # per process (RLIMIT_AS)
    processes: int = 16  # tasks at once (RLIMIT_NPROC under the slot's own uid)
    file_size_bytes: int = 16 * MiB  # one file, stdout and stderr included (RLIMIT_FSIZE)
    open_files: int = 64  # per process (RLIMIT_NOFILE)
    tmpfs_bytes: int = 64 * MiB  # each of the writable work dir (/w, /tmp) and /dev/shm
    output_bytes: int = 64 * KiB  # of stdout and of stderr kept in the result
    traceback_lines: int = 20  # of an error's traceback kept in the result
    # Slot i runs under host uid (and gid) uid_base + i: unprivileged, unused by anything
    # else, so that RLIMIT_NPROC counts only that slot's processes.
    uid_base: int = 2_100_000_000

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise ValueError(f"sandbox.enabled: must be true or false, got {self.enabled!r}")
        _integer("slots", self.slots, 1, 256)
        for key in ("bwrap", "python"):
            value = getattr(self, key)
            if not isinstance(value, str) or not _is_clean_absolute(value):
                raise ValueError(f"sandbox.{key}: must be an absolute, normalised path")
        self._check_system_paths()
        if not any(_under(self.python, root) for root in self.system_paths):
            raise ValueError(
                f"sandbox.python: {self.python} is not under any of sandbox.system_paths"
            )
        timeout = self.wall_timeout_s
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not math.isfinite(timeout)
            or not 0.1 <= timeout <= 3600
        ):
            raise ValueError(
                f"sandbox.wall_timeout_s: must be a number in [0.1, 3600], got {timeout!r}"
            )
        _integer("cpu_seconds", self.cpu_seconds, 1, 3600)
        _integer("memory_bytes", self.memory_bytes, 64 * MiB, 1024 * GiB)
        _integer("processes", self.processes, 2, 4096)
        _integer("file_size_bytes", self.file_size_bytes, 64 * KiB, 64 * GiB)
        _integer("open_files", self.open_files, 16, 1 << 20)
        _integer("tmpfs_bytes", self.tmpfs_bytes, 1 * MiB, 64 * GiB)
        _integer("output_bytes", self.output_bytes, 1 * KiB, self.file_size_bytes)
        _integer("traceback_lines", self.traceback_lines, 1, 1000)
        _integer("uid_base", self.uid_base, 1000, _MAX_UID - self.slots)

    def _check_system_paths(self) -> None:
        paths = self.system_paths
        if not isinstance(paths, tuple) or not paths:
            raise ValueError("sandbox.system_paths: must be a non-empty list of paths")
        for path in paths:
            if not isinstance(path, str) or not _is_clean_absolute(path):
                raise ValueError(f"sandbox.system_paths: {path!r} is not an absolute path")
            for own in _SANDBOX_OWN:
                if _under(own, path) or (own != "/" and _under(path, own)):
                    raise ValueError(
                        f"sandbox.system_paths: {path} would cover or shadow the "
                        f"sandbox's own {own}"
                    )
        if len(set(paths)) != len(paths):
            raise ValueError("sandbox.system_paths: a path is listed twice")

    def slot_uid(self, slot: int) -> int:
        """The host uid (and gid) that slot ``slot`` runs its programs under."""
        return self.uid_base + slot


def _is_clean_absolute(path: str) -> bool:
    return (
        path.startswith("/")
        and "\x00" not in path
        and posixpath.normpath(path) == path
        and not path.startswith("//")
    )


def _under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or inside it (both normalised and absolute)."""
    return path == root or path.startswith(root.rstrip("/") + "/")
