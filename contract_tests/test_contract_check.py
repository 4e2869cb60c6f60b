"""``evald contract check`` against a live server: today's server is compatible with the
contract the client was generated from and with the v1.0.0 baseline; a consumer built
against a contract the server does not serve is told so (exit 4)."""

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from evald_cli._contract import EXIT_INCOMPATIBLE, client_descriptors
from evald_cli.main import main
from tests.harness import ServerProcess, config_data, write_config

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "contract_tests" / "baselines" / "evald-v1.0.0.binpb"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp_path = tmp_path_factory.mktemp("contract-server")
    process = ServerProcess(write_config(tmp_path, config_data(tmp_path)))
    try:
        yield process.start()
    finally:
        process.terminate()


def _check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["contract", "check", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_the_server_is_compatible_with_this_clients_contract(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _check(capsys, "--server", server)
    assert (code, err) == (0, "")
    assert f"{server} (reflection v1) is compatible with the contract this client" in out


@pytest.mark.parametrize("rules", ["FILE", "WIRE_JSON"])
def test_the_server_is_a_compatible_evolution_of_v1_0_0(
    server: str, capsys: pytest.CaptureFixture[str], rules: str
) -> None:
    code, out, _ = _check(capsys, "--server", server, "--against", str(BASELINE), "--rules", rules)
    assert code == 0, out
    assert f"is compatible with {BASELINE}" in out


def test_a_contract_the_server_does_not_serve_is_incompatible(
    server: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A consumer compiled against a (hypothetical) newer contract: a field and an RPC
    # this server does not have.
    image = client_descriptors()
    service_file = next(f for f in image.file if f.name == "evald/v1/service.proto")
    request = next(m for m in service_file.message_type if m.name == "GetRunRequest")
    request.field.add(
        name="view", number=99, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL, json_name="view",
    )  # fmt: skip
    method = service_file.service[0].method.add()
    method.CopyFrom(service_file.service[0].method[0])
    method.name = "ListModelsV2"
    path = tmp_path / "future.binpb"
    path.write_bytes(image.SerializeToString())
    code, out, _ = _check(capsys, "--server", server, "--against", str(path))
    assert code == EXIT_INCOMPATIBLE
    assert "is INCOMPATIBLE with" in out
    assert '"view"' in out
    assert "ListModelsV2" in out


def test_a_proto_directory_is_a_contract_too(
    server: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    workspace = tmp_path / "consumer"
    shutil.copytree(ROOT / "proto", workspace / "proto")
    shutil.copytree(ROOT / "third_party", workspace / "third_party")
    shutil.copy(ROOT / "buf.yaml", workspace / "buf.yaml")
    code, out, _ = _check(capsys, "--server", server, "--against", str(workspace))
    assert code == 0, out


def test_no_server_is_an_error_not_a_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _check(capsys, "--server", "127.0.0.1:1")
    assert code == 1
    assert "reflection failed: UNAVAILABLE" in err
