"""docs/CONTRACT.md names every RPC, message and enum, and shows the tested example."""

import pytest

from contract_tests._support import CONTRACT_DOC, evald_enums, evald_messages
from contract_tests.test_gate import NEW_TASK_TYPE
from evald.v1 import service_pb2

DOC = CONTRACT_DOC.read_text(encoding="utf-8")
SERVICE = service_pb2.DESCRIPTOR.services_by_name["EvaluationService"]


@pytest.mark.parametrize("rpc", [method.name for method in SERVICE.methods])
def test_every_rpc_is_documented(rpc: str) -> None:
    assert f"| {rpc} |" in DOC


def test_every_message_and_enum_is_named() -> None:
    names = {m.name for m in evald_messages() if not m.GetOptions().map_entry}
    names |= {e.name for e in evald_enums()}
    missing = sorted(name for name in names if name not in DOC)
    assert not missing, f"not mentioned in {CONTRACT_DOC.name}: {missing}"


@pytest.mark.parametrize("edit", NEW_TASK_TYPE, ids=[name for name, _, _ in NEW_TASK_TYPE])
def test_worked_example_is_the_tested_edit(edit: tuple[str, str, str]) -> None:
    _, anchor, new_text = edit
    assert new_text.startswith(anchor), "the worked example only adds lines"
    added = new_text.removeprefix(anchor).strip("\n")
    assert added in DOC, "docs/CONTRACT.md must show the edit test_gate.py applies"
