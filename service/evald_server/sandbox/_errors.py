"""The sandbox's errors: failures of the sandbox itself, never of a program.

    SandboxError          the sandbox could not run a program (bwrap failed, the
    │                     harness did not start): not the sample's fault
    └── SandboxUnavailable   sandboxing does not work here; code never runs unsandboxed

A program's own failure (an exception, a limit, the deadline) is no error: it is the
sample's verdict, in ``SandboxResult``.
"""


class SandboxError(Exception):
    """The sandbox could not run a program; the message says what failed."""


class SandboxUnavailable(SandboxError):
    """Sandboxing does not work on this machine (the message names what is missing)."""
