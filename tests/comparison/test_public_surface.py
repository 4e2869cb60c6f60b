"""The comparison package stays pure when imported: no grpc, no store, no engine."""

import subprocess
import sys


def test_the_comparison_imports_neither_grpc_nor_the_store() -> None:
    code = (
        "import sys, evald_server.comparison; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'grpc' "
        "or m.startswith(('evald_server.store', 'evald_server.api', 'evald_server.engine'))); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout
