"""One page request of a listing: token binding, the order of checks, the cut."""

import pytest

from evald_server.app._pages import MAX_PAGE_SIZE, integer, keyset, page_query
from evald_server.domain import ErrorReason, InvalidArgument

FILTERS = {"states": ["running"]}


def test_the_cut_gives_the_page_and_a_token_that_resumes_after_its_last_row() -> None:
    first = page_query("runs", "t", FILTERS, keyset, page_size=2, page_token="")
    assert first.after is None
    assert first.size == 2
    rows = [(1.0, "a"), (2.0, "b"), (3.0, "c")]  # size + 1 read: there is more
    page, token = first.cut(rows, lambda r: [r[0], r[1]])
    assert page == ((1.0, "a"), (2.0, "b"))
    second = page_query("runs", "t", FILTERS, keyset, page_size=2, page_token=token)
    assert second.after == (2.0, "b")
    assert second.cut(rows[2:], lambda r: [r[0], r[1]]) == (((3.0, "c"),), "")


def test_a_token_is_bound_to_its_listing_tenant_and_filters() -> None:
    query = page_query("results", "t", FILTERS, integer, page_size=1, page_token="")
    token = query.token_after([5])
    assert page_query("results", "t", FILTERS, integer, page_size=1, page_token=token).after == 5
    for listing, tenant, filters in (
        ("samples", "t", FILTERS),
        ("results", "other", FILTERS),
        ("results", "t", {"states": []}),
    ):
        with pytest.raises(InvalidArgument) as refused:
            page_query(listing, tenant, filters, integer, page_size=1, page_token=token)
        assert refused.value.reason is ErrorReason.PAGE_TOKEN_INVALID


def test_size_defaults_clamps_and_refuses_negative_after_the_token_is_checked() -> None:
    assert page_query("runs", "t", {}, keyset, page_size=0, page_token="").size == 50
    big = page_query("runs", "t", {}, keyset, page_size=10**9, page_token="")
    assert big.size == MAX_PAGE_SIZE
    with pytest.raises(InvalidArgument) as negative:
        page_query("runs", "t", {}, keyset, page_size=-1, page_token="")
    assert negative.value.reason is ErrorReason.INVALID_ARGUMENT
    with pytest.raises(InvalidArgument) as both:  # a bad token is named first
        page_query("runs", "t", {}, keyset, page_size=-1, page_token="garbage")
    assert both.value.reason is ErrorReason.PAGE_TOKEN_INVALID
    wrong_kind = page_query("runs", "t", {}, integer, page_size=1, page_token="").token_after([1])
    with pytest.raises(InvalidArgument):  # an integer position is not a keyset
        page_query("runs", "t", {}, keyset, page_size=1, page_token=wrong_kind)
