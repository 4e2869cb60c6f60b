"""The CLI's own error: a problem with what the user gave, reported in one line."""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from evald_client import InvalidArgument


class CliError(Exception):
    """A bad spec file, a missing file, a server that would not start; exits with 1."""


@contextmanager
def naming_flags(flags: Mapping[str, str]) -> Iterator[None]:
    """Report a server's complaint about a request field as one about the flag the user
    typed it in (``header.benchmark_version`` → ``--version``).

    Only when every violated field came from a flag; otherwise the server's error
    stands as it is."""
    try:
        yield
    except InvalidArgument as error:
        violations = error.field_violations
        if not violations or any(v.field not in flags for v in violations):
            raise
        said = "; ".join(f"{flags[v.field]}: {v.description}" for v in violations)
        raise CliError(f"{said} ({error.code} {error.reason})") from error
