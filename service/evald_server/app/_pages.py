"""AIP-158 pagination: page sizes and opaque, validated page tokens, for every listing.

``page_query`` reads one page request (token, then size) into a ``PageQuery``, which
cuts the rows a store returned into the page and the next page's token.

A token is URL-safe base64 of a small JSON object: the listing it belongs to, a hash of
the tenant and the filters it was issued for, and the position (a keyset) to resume
after. A token that does not decode, or was issued for another listing or other
filters, is INVALID_ARGUMENT with reason PAGE_TOKEN_INVALID. Tokens carry no secret:
the position only ever selects within the caller's own tenant.
"""

import base64
import binascii
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from evald_server.domain import ErrorReason, FieldViolation, InvalidArgument

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
# Positions are row ids, offsets and epoch timestamps: a forged one outside these
# bounds is refused here rather than overflowing float() or SQLite's 64-bit integer.
MAX_INTEGER_POSITION = 2**63 - 1
MAX_TIME_POSITION = 1e12

P = TypeVar("P")  # a decoded position
R = TypeVar("R")  # a row


def _page_size(requested: int, *, default: int = DEFAULT_PAGE_SIZE) -> int:
    """0 means the default; above the maximum is clamped (AIP-158); negative is invalid."""
    if requested < 0:
        raise InvalidArgument(
            ErrorReason.INVALID_ARGUMENT,
            f"page_size must not be negative, got {requested}",
            field_violations=(FieldViolation("page_size", "must not be negative"),),
        )
    return default if requested == 0 else min(requested, MAX_PAGE_SIZE)


def _binding(listing: str, tenant: str, filters: Mapping[str, Any]) -> str:
    canonical = json.dumps([listing, tenant, filters], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def encode_token(
    listing: str, tenant: str, filters: Mapping[str, Any], position: Sequence[Any]
) -> str:
    body = {"l": listing, "b": _binding(listing, tenant, filters), "p": list(position)}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(
    token: str, listing: str, tenant: str, filters: Mapping[str, Any]
) -> list[Any] | None:
    """The position a token resumes after; None for an empty token (the first page)."""
    if not token:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        body = json.loads(raw)
        valid = (
            isinstance(body, dict)
            and body.get("l") == listing
            and body.get("b") == _binding(listing, tenant, filters)
            and isinstance(body.get("p"), list)
        )
    except (binascii.Error, ValueError, UnicodeDecodeError):
        valid = False
    if not valid:
        raise InvalidArgument(
            ErrorReason.PAGE_TOKEN_INVALID,
            "page_token is not a token this listing issued with these filters",
            field_violations=(FieldViolation("page_token", "invalid or for another query"),),
        )
    position: list[Any] = body["p"]
    return position


def _invalid_position() -> InvalidArgument:
    return InvalidArgument(
        ErrorReason.PAGE_TOKEN_INVALID,
        "page_token does not hold a valid position",
        field_violations=(FieldViolation("page_token", "invalid position"),),
    )


def keyset(position: list[Any] | None) -> tuple[float, str] | None:
    """A (created_at, id) keyset position."""
    if position is None:
        return None
    if len(position) != 2 or not isinstance(position[1], str):
        raise _invalid_position()
    created = position[0]
    if isinstance(created, bool) or not isinstance(created, int | float):
        raise _invalid_position()
    if isinstance(created, int) and abs(created) > MAX_TIME_POSITION:
        raise _invalid_position()  # before float(): a huge int would overflow it
    if not (math.isfinite(created) and abs(created) <= MAX_TIME_POSITION):
        raise _invalid_position()
    return float(created), position[1]


def integer(position: list[Any] | None) -> int:
    """A single integer position (a row id or an offset); 0 for the first page."""
    if position is None:
        return 0
    if (
        len(position) != 1
        or isinstance(position[0], bool)
        or not isinstance(position[0], int)
        or not 0 <= position[0] <= MAX_INTEGER_POSITION
    ):
        raise _invalid_position()
    return int(position[0])


@dataclass(frozen=True, slots=True)
class PageQuery(Generic[P]):
    """One page request of one listing: where it resumes, how many rows it shows, and
    the token of the page after it (bound to the same tenant and filters)."""

    listing: str
    tenant: str
    filters: Mapping[str, Any]
    after: P  # the decoded position this page resumes after
    size: int

    def token_after(self, position: Sequence[Any]) -> str:
        return encode_token(self.listing, self.tenant, self.filters, position)

    def cut(
        self, rows: Sequence[R], position_of: Callable[[R], Sequence[Any]]
    ) -> tuple[tuple[R, ...], str]:
        """Rows read one beyond the size (``size + 1``): this page's rows and the next
        page's token, "" at the end."""
        page = tuple(rows[: self.size])
        more = len(rows) > self.size
        return page, self.token_after(position_of(page[-1])) if more else ""


def page_query(
    listing: str,
    tenant: str,
    filters: Mapping[str, Any],
    position: Callable[[list[Any] | None], P],
    *,
    page_size: int,
    page_token: str,
) -> PageQuery[P]:
    """Decode and check the token (its position read by ``keyset`` or ``integer``),
    then the size: INVALID_ARGUMENT for either, naming the field."""
    after = position(decode_token(page_token, listing, tenant, filters))
    return PageQuery(listing, tenant, filters, after, _page_size(page_size))
