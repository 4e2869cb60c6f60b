"""Errors of the store itself (not request failures: those are ``EvaldError``s)."""


class StoreError(Exception):
    """The database cannot be used: a newer schema, a bad URL, or corruption."""


class StoreUnavailable(StoreError):
    """The database could not be reached within the store's ``wait_s``."""


class UnstorableOutcome(Exception):
    """A batch of outcomes holds a value the database cannot keep (a number out of its
    column's range, text it cannot encode, a constraint it breaks). The batch's
    transaction was rolled back: nothing of it is stored, and the store is as usable as
    before (unlike a ``StoreError``). The committer finds the outcome that cannot be
    stored by writing the batch in parts (``engine._committer``)."""

    def __init__(self, cause: BaseException) -> None:
        text = " ".join(str(cause).split())
        # The driver's message may quote the whole value: a prefix says what it was.
        self.detail = f"{type(cause).__name__}: {text[:200]}{'…' if len(text) > 200 else ''}"
        super().__init__(self.detail)


class LiveRunLimitReached(Exception):
    """A tenant already has ``live`` unfinished runs, the most ``create_run`` allows."""

    def __init__(self, live: int, limit: int) -> None:
        super().__init__(f"{live} runs in flight, limit {limit}")
        self.live = live
        self.limit = limit
