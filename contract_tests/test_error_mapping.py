"""The error mapping table of docs/CONTRACT.md, entry by entry.

Each ErrorReason has one row in the server's ERROR_TABLE and one in the document; both
agree on category, gRPC code, HTTP equivalent and retryability, the gRPC code is a real
``grpc.StatusCode``, and the reason and category exist on the wire (as proto enum
values, and as ``google.rpc.ErrorInfo.reason`` without the ``ERROR_REASON_`` prefix).
"""

import re

import grpc
import pytest

from contract_tests._support import CONTRACT_DOC
from evald.v1 import errors_pb2
from evald_server.domain import ErrorCategory, ErrorReason
from evald_server.domain._error_table import ERROR_TABLE

_ROW = re.compile(r"^\| `(\w+)` \| (\w+) \| (\w+) \| (\d{3}) \| (yes|no) \|$")


def _documented() -> dict[str, tuple[str, str, int, bool]]:
    text = CONTRACT_DOC.read_text(encoding="utf-8")
    table = text.split("<!-- error-table:start -->")[1].split("<!-- error-table:end -->")[0]
    rows: dict[str, tuple[str, str, int, bool]] = {}
    for line in table.strip().splitlines()[2:]:  # skip the header and separator
        match = _ROW.match(line)
        assert match, f"malformed error table row in {CONTRACT_DOC.name}: {line!r}"
        reason, category, code, http, retryable = match.groups()
        assert reason not in rows, f"{reason} is documented twice"
        rows[reason] = (category, code, int(http), retryable == "yes")
    return rows


DOCUMENTED = _documented()


def test_table_has_one_row_per_reason() -> None:
    assert set(DOCUMENTED) == {reason.name for reason in ErrorReason}
    assert set(ERROR_TABLE) == set(ErrorReason)


@pytest.mark.parametrize("reason", list(ErrorReason), ids=lambda reason: reason.name)
def test_documented_mapping_matches_the_server_table(reason: ErrorReason) -> None:
    mapping = ERROR_TABLE[reason]
    category, code, http, retryable = DOCUMENTED[reason.name]
    assert category == mapping.category.name
    assert code == mapping.grpc_code
    assert http == mapping.http_equivalent
    assert retryable == mapping.retryable
    assert code in grpc.StatusCode.__members__
    assert code != "OK"
    assert 400 <= http <= 599
    # On the wire: the proto enum values the API layer maps to by name.
    assert f"ERROR_REASON_{reason.name}" in errors_pb2.ErrorReason.DESCRIPTOR.values_by_name
    assert f"ERROR_CATEGORY_{category}" in errors_pb2.ErrorCategory.DESCRIPTOR.values_by_name


# The category-level contract of DESIGN.md §4: which codes each category may use.
CATEGORY_CODES: dict[ErrorCategory, set[tuple[str, int]]] = {
    ErrorCategory.DATASET_INVALID: {
        ("INVALID_ARGUMENT", 400),
        ("NOT_FOUND", 404),
        ("ALREADY_EXISTS", 409),
        ("RESOURCE_EXHAUSTED", 413),
    },
    ErrorCategory.MODEL_PROVIDER_ERROR: {("UNAVAILABLE", 502), ("DEADLINE_EXCEEDED", 502)},
    ErrorCategory.EVAL_OPERATOR_ERROR: {("INTERNAL", 500), ("UNAVAILABLE", 503)},
    ErrorCategory.REQUEST_INVALID: {
        ("INVALID_ARGUMENT", 400),
        ("NOT_FOUND", 404),
        ("ALREADY_EXISTS", 409),
        ("RESOURCE_EXHAUSTED", 429),
        ("FAILED_PRECONDITION", 400),
        ("OUT_OF_RANGE", 400),
        ("UNAUTHENTICATED", 401),
    },
}


@pytest.mark.parametrize("reason", list(ErrorReason), ids=lambda reason: reason.name)
def test_reason_uses_a_code_of_its_category(reason: ErrorReason) -> None:
    mapping = ERROR_TABLE[reason]
    assert (mapping.grpc_code, mapping.http_equivalent) in CATEGORY_CODES[mapping.category]


def test_timeouts_and_not_found_use_their_specific_codes() -> None:
    assert ERROR_TABLE[ErrorReason.PROVIDER_TIMEOUT].grpc_code == "DEADLINE_EXCEEDED"
    for reason in ErrorReason:
        if reason.name.endswith("_NOT_FOUND"):
            assert ERROR_TABLE[reason].grpc_code == "NOT_FOUND", reason
        if reason.name.endswith("_CONFLICT"):
            assert ERROR_TABLE[reason].grpc_code == "ALREADY_EXISTS", reason
