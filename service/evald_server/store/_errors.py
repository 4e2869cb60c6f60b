"""Errors of the store itself (not request failures: those are ``EvaldError``s)."""


class StoreError(Exception):
    """The database cannot be used: a newer schema, a bad URL, or corruption."""


class StoreUnavailable(StoreError):
    """The database could not be reached within the store's ``wait_s``."""


class LiveRunLimitReached(Exception):
    """A tenant already has ``live`` unfinished runs, the most ``create_run`` allows."""

    def __init__(self, live: int, limit: int) -> None:
        super().__init__(f"{live} runs in flight, limit {limit}")
        self.live = live
        self.limit = limit
