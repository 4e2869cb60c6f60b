"""The hostile programs, shared by the sandbox's own tests (``test_hostile``) and the
same corpus through the real server (``tests/code_runs/test_hostile_through_the_server``).

Each is a program's source (module-level code: it runs before any test). Programs that
need a value of the test (a port, a pid, paths) are functions returning the source.
Every file a program tries to leave has ``MARKER`` in its name, so that a test can look
for it on the host afterwards.
"""

MARKER = "evald-hostile-marker"

FORK_BOMB = """
import os, time
children = 0
try:
    while children < 10_000:
        if os.fork() == 0:
            time.sleep(3600)
            os._exit(0)
        children += 1
finally:
    print(children, flush=True)
"""

MEMORY_BOMB = "blocks = []\nwhile True:\n    blocks.append(bytearray(1 << 24))\n"

INFINITE_LOOP = "while True:\n    pass\n"

SLEEP_PAST_THE_DEADLINE = "import time\ntime.sleep(3600)\n"

TEN_GB_FILE = (
    f"with open('/w/{MARKER}', 'wb') as f:\n"
    "    for _ in range(10 * 1024):\n"
    "        f.write(bytes(1 << 20))\n"
)

FILL_THE_TMPFS = (
    "for i in range(1000):\n"
    f"    with open(f'/tmp/{MARKER}-{{i}}', 'wb') as f:\n"
    "        f.write(bytes(512 * 1024))\n"
)

OPEN_100000_FILES = "handles = [open('/dev/null') for _ in range(100_000)]\n"

PRINT_A_GIGABYTE = (
    "import sys\nchunk = 'y' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
)

INVALID_UTF8 = (
    "import sys\nsys.stdout.buffer.write(b'\\xc3\\x28\\xa0')\nsys.stderr.buffer.write(b'\\xff')\n"
)

BACKGROUND_PROCESS = (
    "import os, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        time.sleep(3600)\n"
    "    os._exit(0)\n"
    "os.wait()\n"
)

# A wrong solution (the tests want x + 2) and a program that prints what a naive
# harness would read as a pass: the verdict must still be "failed".
WRONG = "def solve(x):\n    return x + 1\n"
PRINTS_PASSED = "print('passed')\nprint('{\"verdict\": \"passed\"}')"


def read_secrets(paths: list[str], secret: str) -> str:
    """Reads every path (each must be missing: ENOENT), lists / (only the sandbox's own
    mounts), reads every file it can see, and asserts that ``secret`` is in none."""
    return (
        "import os\n"
        "seen = []\n"
        f"for path in {paths!r}:\n"
        "    try:\n"
        "        seen.append(open(path).read())\n"
        "    except OSError as e:\n"
        "        assert e.errno == 2, e  # ENOENT: not there at all\n"
        "assert sorted(os.listdir('/')) == "
        "['bin', 'dev', 'lib', 'lib64', 'sbin', 'tmp', 'usr', 'w']\n"
        "for top in ['/w', '/dev/shm']:\n"
        "    for root, dirs, files in os.walk(top):\n"
        "        for name in files:\n"
        "            seen.append(open(os.path.join(root, name), errors='replace').read())\n"
        f"assert not any({secret!r} in text for text in seen)\n"
        "print(len(seen))\n"
    )


def connect_to(ports: list[int]) -> str:
    """Tries each loopback address on each port; connecting anywhere ends it with an
    error (``SystemExit('connected to ...')``)."""
    return (
        "import socket\n"
        f"for port in {ports!r}:\n"
        "    for host in ['127.0.0.1', 'localhost', '::1']:\n"
        "        try:\n"
        "            socket.create_connection((host, port), timeout=2).close()\n"
        "            raise SystemExit(f'connected to {host}:{port}')\n"
        "        except OSError:\n"
        "            pass\n"
    )


def kill_parent_and_others(host_pids: list[int]) -> str:
    """Kills its parent, every process it may (-1, 0, 2, 3) and the given host pids."""
    return (
        "import os, signal\n"
        "for pid in [os.getppid(), -1, 0, 2, 3]:\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n"
        "        pass\n"
        f"for pid in {host_pids!r}:\n"
        "    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n"
        "    except ProcessLookupError:\n"
        "        pass\n"
    )
