"""The command line that starts one program in a fresh sandbox.

    setpriv --reuid U --regid U --clear-groups --     the slot's own unprivileged uid
      prlimit --cpu --as --nproc --fsize --nofile --core --
        bwrap <namespaces, mounts, environment, seccomp> --
          python -I -B -c <the harness>

Why each part:

* **setpriv** drops from root to the slot's uid (``uid_base + slot``) before anything
  else runs. RLIMIT_NPROC counts the processes of a *real uid*, and root (or any
  process of the host's uid 0, even inside a user namespace) is exempt from it; under
  its own uid a slot's fork bomb stops at ``processes``, whatever else runs.
* **prlimit** sets the resource limits, which every process of the sandbox inherits.
  bwrap's own process runs under the slot's uid too, so RLIMIT_NPROC is
  ``processes + 1``.
* **bwrap** (not setuid: it builds the namespaces as the unprivileged slot uid) gives
  the program new user, pid, network, ipc, uts and cgroup namespaces; no network but
  its own loopback; the system paths read-only and nothing else of the host (no /etc,
  no /proc, no /home, /root, /work or the host's /tmp); a tmpfs of ``tmpfs_bytes`` as
  its working directory /w (with /tmp in it) and another at /dev/shm; an environment
  of four variables; no new user namespaces; a new session (no terminal injection);
  the seccomp filter of ``_seccomp``; and ``--die-with-parent``. ``--as-pid-1``: the
  harness itself is the pid namespace's init, so that killing it (its pid comes on
  the info fd) kills every process of the sandbox at once, and bwrap reaps it before
  it exits (bwrap's own init would outlive bwrap as a zombie that only the host's pid
  1 reaps, and a zombie still counts against RLIMIT_NPROC).
* **python -I -B** ignores PYTHON* variables and the user's site, and writes no
  ``.pyc``; inside, the program runs as uid 1000, never as the namespace's root (a
  root there would get capabilities back on exec).
"""

import os
from dataclasses import dataclass

from evald_server.sandbox._settings import SandboxSettings

SETPRIV = "/usr/bin/setpriv"  # util-linux, present on every Debian system
PRLIMIT = "/usr/bin/prlimit"
SANDBOX_UID = 1000  # the program's uid (and gid) inside its user namespace
WORK_DIR = "/w"
BWRAP_PROCESSES = 1  # bwrap's own process, under the slot's uid too
ENVIRONMENT = {
    "PATH": "/usr/bin:/bin",
    "HOME": WORK_DIR,
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
}


@dataclass(frozen=True, slots=True)
class Fds:
    """The descriptors a run passes to bwrap (their numbers in this process)."""

    info: int  # bwrap writes the namespace init's pid and namespace ids here
    seccomp: int  # the compiled seccomp filter, read by bwrap


def system_mounts(paths: tuple[str, ...]) -> tuple[str, ...]:
    """bwrap arguments that show ``paths`` read-only: a directory is bound, a symlink
    (merged /usr: /lib -> usr/lib) recreated, a missing path skipped."""
    arguments: list[str] = []
    for path in paths:
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            arguments += ["--ro-bind", path, path]
    return tuple(arguments)


def sandbox_command(
    settings: SandboxSettings,
    *,
    slot: int,
    mounts: tuple[str, ...],
    fds: Fds,
    harness: str,
    drop_to_slot_uid: bool = True,
) -> list[str]:
    """The whole command line for one run in ``slot``."""
    uid = settings.slot_uid(slot)
    drop = [SETPRIV, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    tmpfs = str(settings.tmpfs_bytes)
    limits = [
        PRLIMIT,
        f"--cpu={settings.cpu_seconds}:{settings.cpu_seconds + 1}",
        f"--as={settings.memory_bytes}",
        f"--nproc={settings.processes + BWRAP_PROCESSES}",
        f"--fsize={settings.file_size_bytes}",
        f"--nofile={settings.open_files}",
        "--core=0",
        "--",
    ]
    environment = [arg for name, value in ENVIRONMENT.items() for arg in ("--setenv", name, value)]
    bwrap = [
        settings.bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--hostname",
        "evald-sandbox",
        "--clearenv",
        *environment,
        *mounts,
        "--dev",
        "/dev",
        "--size",
        tmpfs,
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        tmpfs,
        "--tmpfs",
        WORK_DIR,
        "--perms",
        "01777",
        "--dir",
        f"{WORK_DIR}/tmp",
        "--symlink",
        f"{WORK_DIR}/tmp",
        "/tmp",
        "--chdir",
        WORK_DIR,
        "--remount-ro",
        "/",
        "--info-fd",
        str(fds.info),
        "--seccomp",
        str(fds.seccomp),
        "--",
    ]
    python = [settings.python, "-I", "-B", "-c", harness]
    return [*(drop if drop_to_slot_uid else []), *limits, *bwrap, *python]
