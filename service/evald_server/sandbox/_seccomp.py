"""A seccomp filter that keeps a sandboxed process out of another process's memory.

bwrap loads it (``--seccomp FD``) right before it starts the program, so it binds the
program and everything it starts, and cannot be removed. The program may run other
binaries of the system (``gdb``, ``strace``, a fresh ``python`` with ``ctypes``); the
filter makes ``ptrace``, ``process_vm_readv``/``writev``, ``perf_event_open`` (which
can sample another process's stack) and ``pidfd_getfd`` (which takes another process's
file descriptor) fail with ``EPERM``, so that nothing can read the harness's memory or
take its result channel. A system call of another ABI (i386 on x86-64, x32) fails too,
so that a number of another table cannot slip past the list.

The filter is classic BPF (``struct sock_filter``, 8 bytes per instruction, native
byte order), written here for the two architectures below; on any other one
``seccomp_filter`` raises ``UnsupportedArchitecture``.
"""

import errno
import platform
import struct
from dataclasses import dataclass

# linux/filter.h and linux/seccomp.h
_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_NR_OFFSET = 0  # struct seccomp_data: int nr; __u32 arch; ...
_ARCH_OFFSET = 4
_X32_SYSCALL_BIT = 0x40000000


@dataclass(frozen=True, slots=True)
class _Table:
    audit_arch: int
    denied: dict[str, int]  # system call name -> number
    x32: bool = False  # syscalls with __X32_SYSCALL_BIT are another ABI


_TABLES = {
    "x86_64": _Table(
        audit_arch=0xC000003E,
        denied={
            "ptrace": 101,
            "perf_event_open": 298,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "pidfd_getfd": 438,
        },
        x32=True,
    ),
    "aarch64": _Table(
        audit_arch=0xC00000B7,
        denied={
            "ptrace": 117,
            "perf_event_open": 241,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "pidfd_getfd": 438,
        },
    ),
}
DENIED_SYSCALLS = tuple(sorted(_TABLES["x86_64"].denied))


class UnsupportedArchitecture(Exception):
    """This machine's architecture has no system call table here."""


def seccomp_filter(machine: str | None = None) -> bytes:
    """The compiled filter for ``machine`` (default: this one's, ``platform.machine()``)."""
    name = machine or platform.machine()
    table = _TABLES.get(name)
    if table is None:
        raise UnsupportedArchitecture(
            f"no seccomp system call table for {name!r} (known: {sorted(_TABLES)})"
        )
    deny = _RET_ERRNO | errno.EPERM
    checks = list(table.denied.values())
    # Layout: [arch load, arch check, nr load, (x32 check), one check per number,
    # allow, deny]; a jump's offset counts the instructions it skips.
    body: list[tuple[int, int, int, int]] = []
    tail = len(checks) + (1 if table.x32 else 0)  # instructions between nr load and allow
    body.append((_LD_W_ABS, 0, 0, _ARCH_OFFSET))
    body.append((_JEQ_K, 0, tail + 2, table.audit_arch))  # other ABI: to deny
    body.append((_LD_W_ABS, 0, 0, _NR_OFFSET))
    remaining = tail
    if table.x32:
        remaining -= 1
        body.append((_JGE_K, remaining + 1, 0, _X32_SYSCALL_BIT))
    for number in checks:
        remaining -= 1
        body.append((_JEQ_K, remaining + 1, 0, number))
    body.append((_RET_K, 0, 0, _RET_ALLOW))
    body.append((_RET_K, 0, 0, deny))
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in body)
