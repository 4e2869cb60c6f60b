"""``evald serve`` reports what keeps it from starting in one line, with the server
entry's exit status (2: cannot start); client commands never load the server package."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from evald_cli.main import main


def test_serve_with_a_missing_config_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--config", str(tmp_path / "none.toml")]) == 2
    err = capsys.readouterr().err
    assert err == f"evald: invalid config: {tmp_path / 'none.toml'}: no such file\n"


def test_serve_with_an_invalid_key_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "evald.toml"
    path.write_text('[[models]]\nid = "m"\nprovider = "simulated"\nmax_concurrency = 0\n')
    assert main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evald: invalid config: models[0].max_concurrency:")
    assert err.count("\n") == 1


def test_client_commands_do_not_import_the_server() -> None:
    code = (
        "import sys\n"
        "from evald_cli.main import main\n"
        "main(['models', '--server', '127.0.0.1:1'])\n"
        "bad = sorted(m for m in sys.modules if m.startswith('evald_server'))\n"
        "print(bad)\n"
        "sys.exit(3 if bad else 0)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_serve_on_a_taken_port_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        path = tmp_path / "evald.toml"
        path.write_text(
            f'[server]\nlisten = "127.0.0.1:{port}"\n'
            f'[store]\nurl = "sqlite:///{(tmp_path / "db.sqlite3").as_posix()}"\n'
        )
        assert main(["serve", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"evald: invalid config: server.listen: cannot bind 127.0.0.1:{port}\n"
