"""The sandbox's hostile corpus (``tests/sandbox/_corpus``) as model answers, through the
real server: each program ends as a graded per-sample verdict, the run finishes, the
other samples are scored, the server still answers, and afterwards no process of a
sandbox slot is left, no file the programs tried to write is on the host and the
server's RSS grew by a bounded amount."""

import os
import socket
from pathlib import Path

import anyio
import psutil
import pytest

from evald_client import CodePayload, ResultStatus, RunState, SubtaskState
from tests.code_runs._support import code_server, fenced, sandbox_table
from tests.sandbox._corpus import (
    BACKGROUND_PROCESS,
    FORK_BOMB,
    INFINITE_LOOP,
    INVALID_UTF8,
    MARKER,
    MEMORY_BOMB,
    OPEN_100000_FILES,
    PRINT_A_GIGABYTE,
    PRINTS_PASSED,
    SLEEP_PAST_THE_DEADLINE,
    TEN_GB_FILE,
    WRONG,
    connect_to,
    kill_parent_and_others,
    read_secrets,
)
from tests.sandbox._support import processes_of_uids, slot_uids

pytestmark = pytest.mark.anyio
RIGHT = "def solve(x):\n    return x + 2\n"
RSS_GROWTH_BOUND = 128 << 20  # the server runs in this process
HOST_DIRS = (Path("/tmp"), Path("/root"), Path.cwd())
SECRET = "evald-secret-5c1e"


def _markers() -> set[Path]:
    return {p for d in HOST_DIRS if d.is_dir() for p in d.iterdir() if MARKER in p.name}


def _corpus(tmp_path: Path, ports: list[int]) -> dict[str, tuple[str, str]]:
    """name → (the answer's program, the verdict it must get). Each hostile program is
    followed by a right ``solve``, except the one that prints "passed" over a wrong one."""
    config = tmp_path / "evald.toml"
    config.write_text(f"api_key = '{SECRET}'\n")
    tenant = tmp_path / "tenant-b" / "dataset.jsonl"
    tenant.parent.mkdir()
    tenant.write_text(f'{{"input": "{SECRET}"}}\n')
    store = tmp_path / "evald.sqlite3"
    secrets = [
        "/proc/self/environ",
        "/proc/1/environ",
        str(config),
        str(store),
        str(store) + "-wal",
        str(tenant),
    ]
    corpus = {
        "fork_bomb": (FORK_BOMB, "resource_limit"),
        "memory_bomb": (MEMORY_BOMB, "resource_limit"),
        "infinite_loop": (INFINITE_LOOP, "timeout"),
        "sleep_past_the_deadline": (SLEEP_PAST_THE_DEADLINE, "timeout"),
        "ten_gb_file": (TEN_GB_FILE, "resource_limit"),
        "open_100000_files": (OPEN_100000_FILES, "resource_limit"),
        "print_a_gigabyte": (PRINT_A_GIGABYTE, "resource_limit"),
        "invalid_utf8": (INVALID_UTF8, "passed"),
        # "passed" below: the program's own asserts (nothing readable, nothing
        # reached, nobody killed) held, and the tests then ran against ``solve``.
        "read_secrets": (read_secrets(secrets, SECRET), "passed"),
        "connect_out": (connect_to(ports), "passed"),
        "kill_parent": (kill_parent_and_others([os.getpid(), os.getppid()]), "passed"),
        "background_process": (BACKGROUND_PROCESS, "passed"),
    }
    answers = {
        name: (f"{program}\n{RIGHT}", verdict) for name, (program, verdict) in corpus.items()
    }
    answers["prints_passed"] = (f"{PRINTS_PASSED}\n{WRONG}", "failed")
    return answers


def _record(name: str) -> dict[str, object]:
    return {
        "id": name,
        "text": f"[task {name}] Write solve(x), which returns x + 2.",
        "test_list": ["assert solve(1) == 3", "assert solve(-2) == 0"],
        "code": RIGHT,
    }


async def test_the_hostile_corpus_ends_as_graded_verdicts_and_the_server_is_unaffected(
    tmp_path: Path,
) -> None:
    before_files = _markers()
    rss_before = psutil.Process().memory_info().rss
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    # The server's own port is known once it listens: the corpus is built then.
    answers: dict[str, str] = {}
    expected: dict[str, str] = {}
    sandbox = sandbox_table(wall_timeout_s=10.0)
    try:
        async with code_server(tmp_path, answers, sandbox=sandbox) as (client, address, _fake):
            server_port = int(address.rsplit(":", 1)[1])
            corpus = _corpus(tmp_path, [listener.getsockname()[1], server_port])
            for name, (program, verdict) in corpus.items():
                answers[f"[task {name}]"] = fenced(program)
                expected[name] = verdict
            answers["[task right]"] = fenced(RIGHT)
            expected["right"] = "passed"
            answers["[task wrong]"] = fenced(WRONG)
            expected["wrong"] = "failed"
            records = [_record(name) for name in expected]
            await client.upload_dataset(
                name="hostile", version="1.0.0", task_type="code", records=records
            )
            run = await client.create_run(models=["fake"], datasets=[("hostile", "1.0.0")])
            with anyio.fail_after(300):
                run = await client.wait(run.run_id)
            assert run.state is RunState.SUCCEEDED
            (result,) = await client.results(run.run_id)
            samples = {s.record_id: s async for s in client.samples(run.run_id)}
            assert [m.model_id for m in await client.list_models()] == ["fake"]  # still serving
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection ever arrived
    finally:
        listener.close()
    verdicts = {}
    for name, sample in samples.items():
        assert sample.state is SubtaskState.SUCCEEDED
        assert sample.execution is not None
        verdicts[name] = sample.execution.verdict
    assert verdicts == expected
    for name in ("print_a_gigabyte", "invalid_utf8"):
        execution = samples[name].execution
        assert execution is not None
        assert len(execution.stdout) <= 2000
    assert samples["invalid_utf8"].execution.stdout == "\ufffd(\ufffd"  # type: ignore[union-attr]
    assert SECRET not in str(samples["read_secrets"].execution)
    assert result.status is ResultStatus.SUCCESS
    assert isinstance(result.payload, CodePayload)
    passed = sum(1 for v in expected.values() if v == "passed")
    assert result.metrics["pass_at_1"] == pytest.approx(passed / len(expected))
    assert processes_of_uids(slot_uids()) == [], "a sandbox process outlived its sample"
    assert _markers() == before_files, "a program wrote a file outside its sandbox"
    assert psutil.pid_exists(os.getpid())
    assert psutil.Process().memory_info().rss - rss_before < RSS_GROWTH_BOUND
