"""Errors of the store itself (not request failures: those are ``EvaldError``s)."""


class StoreError(Exception):
    """The database cannot be used: a newer schema, a bad URL, or corruption."""
