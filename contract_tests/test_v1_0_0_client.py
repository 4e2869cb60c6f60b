"""The promise end to end: a Python client generated today from the v1.0.0 baseline
image (what a consumer compiled at the first release has) runs a whole flow against
today's server — upload, create, watch to the end, results, and an error it can read."""

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

from tests.harness import ServerProcess, config_data, write_config

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "contract_tests" / "baselines" / "evald-v1.0.0.binpb"

FLOW = textwrap.dedent(
    """
    import json, sys
    import grpc
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status
    from evald.v1 import dataset_pb2, enums_pb2, run_pb2, service_pb2, service_pb2_grpc

    # The v1.0.0 code, not today's: it has no CompareRuns.
    assert service_pb2.__file__.startswith(sys.argv[2]), service_pb2.__file__
    assert "CompareRuns" not in service_pb2.DESCRIPTOR.services_by_name[
        "EvaluationService"].methods_by_name

    with grpc.insecure_channel(sys.argv[1]) as channel:
        stub = service_pb2_grpc.EvaluationServiceStub(channel)
        records = [{"input": f"x{i}", "label": "yes" if i % 2 else "no"} for i in range(8)]
        content = "".join(json.dumps(r) + "\\n" for r in records).encode()
        header = dataset_pb2.UploadDatasetHeader(
            name="old", benchmark_version="1.0.0",
            task_type=enums_pb2.TASK_TYPE_CLASSIFICATION)
        uploaded = stub.UploadDataset(iter([
            service_pb2.UploadDatasetRequest(header=header),
            service_pb2.UploadDatasetRequest(chunk=content)]), timeout=30)
        assert uploaded.dataset.record_count == 8
        spec = run_pb2.RunSpec(name="old-client", model_ids=["sim-good"], datasets=[
            dataset_pb2.DatasetRef(name="old", benchmark_version="1.0.0")])
        run = stub.CreateRun(service_pb2.CreateRunRequest(spec=spec), timeout=30).run
        states = [e.event.state_changed.state
                  for e in stub.WatchRun(service_pb2.WatchRunRequest(run_id=run.run_id),
                                         timeout=60)
                  if e.event.HasField("state_changed")]
        assert states[-1] == enums_pb2.RUN_STATE_SUCCEEDED, states
        (result,) = stub.ListResults(
            service_pb2.ListResultsRequest(run_id=run.run_id), timeout=30).results
        assert result.WhichOneof("payload") == "classification"
        assert 0.0 <= result.metrics_summary["accuracy"] <= 1.0
        assert result.metric_uncertainty["accuracy"].bootstrap.upper >= 0
        try:
            stub.GetRun(service_pb2.GetRunRequest(run_id="run_missing"), timeout=30)
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND
            info = error_details_pb2.ErrorInfo()
            assert rpc_status.from_call(error).details[0].Unpack(info)
            assert (info.reason, info.domain) == ("RUN_NOT_FOUND", "evald")
        else:
            raise AssertionError("GetRun of a missing run succeeded")
    print("v1.0.0 flow ok")
    """
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    process = ServerProcess(write_config(tmp_path, config_data(tmp_path)))
    try:
        yield process.start()
    finally:
        process.terminate()


def _generate_v1_0_0(out: Path) -> None:
    from grpc_tools import protoc  # type: ignore[import-untyped]  # dev-only dependency

    image = descriptor_pb2.FileDescriptorSet.FromString(BASELINE.read_bytes())
    files = [f.name for f in image.file if f.name.startswith("evald/")]
    status = protoc.main(
        [
            "grpc_tools.protoc",
            f"--descriptor_set_in={BASELINE}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            *files,
        ]
    )
    assert status == 0
    for package in (out / "evald", out / "evald" / "v1"):
        (package / "__init__.py").touch()


def test_a_client_generated_from_the_v1_0_0_image_runs_a_full_flow(
    server: str, tmp_path: Path
) -> None:
    generated = tmp_path / "old_client"
    generated.mkdir()
    _generate_v1_0_0(generated)
    done = subprocess.run(
        [sys.executable, "-c", FLOW, server, str(generated)],
        env={"PYTHONPATH": str(generated), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "v1.0.0 flow ok"
