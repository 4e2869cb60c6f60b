"""The CLI's own error: a problem with what the user gave, reported in one line."""


class CliError(Exception):
    """A bad spec file, a missing file, a server that would not start; exits with 1."""
