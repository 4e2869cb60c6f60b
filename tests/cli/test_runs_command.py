"""`evald runs` against a real server process: newest first, state filter, limit, JSON."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evald_cli.main import main
from evald_client import EvaldClient, RunState
from tests.harness import server_process


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with server_process(tmp_path) as address:
        yield address


def test_runs_lists_newest_first_filters_by_state_and_limits(
    server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [{"question": f"q{i}?", "answers": ["a"]} for i in range(3)]
    with EvaldClient(server) as client:
        client.upload_dataset(name="tiny", version="1.0.0", task_type="qa", records=records)
        first = client.create_run(models=["sim-good"], datasets=[("tiny", "1.0.0")], name="one")
        client.wait(first.run_id, timeout_s=60)
        second = client.create_run(models=["sim-weak"], datasets=[("tiny", "1.0.0")], name="two")
        client.cancel_run(second.run_id)
        second_state = client.wait(second.run_id, timeout_s=60).state

    assert main(["runs", "--server", server, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in listed] == [second.run_id, first.run_id]

    assert main(["runs", "--server", server, "--json", "--state", "succeeded"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [first.run_id]

    assert main(["runs", "--server", server, "--json", "--limit", "1"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [second.run_id]

    assert main(["runs", "--server", server]) == 0
    table = capsys.readouterr().out
    assert first.run_id in table
    assert "tiny@1.0.0" in table
    assert second_state.value in table
    assert RunState.SUCCEEDED.value in table
