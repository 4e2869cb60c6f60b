"""The gate catches breaking edits and lets compatible ones through.

Each test applies an edit to a temporary copy of the buf workspace and runs the gate
command against the released baseline, exactly as CI would after that edit.
"""

import shutil
from pathlib import Path

import pytest

from contract_tests._support import BASELINES, REPO_ROOT, baseline_pool, run_gate

# (file under proto/evald/v1, text that occurs exactly once, replacement)
Edit = tuple[str, str, str]

BREAKING_EDITS: dict[str, tuple[list[Edit], str]] = {
    "change a field's type": (
        [("result.proto", "int64 samples_total = 1;", "string samples_total = 1;")],
        'Field "1" with name "samples_total" on message "ExecutionProfile" changed type',
    ),
    "renumber a field": (
        [("errors.proto", "string message = 3;", "string message = 7;")],
        'Previously present field "3" with name "message" on message "EvalError" was deleted',
    ),
    "delete an enum value without reserved": (
        [
            (
                "errors.proto",
                "  // The scorer did not finish in time.\n  ERROR_REASON_SCORER_TIMEOUT = 20;\n",
                "",
            )
        ],
        'Previously present enum value "20" on enum "ErrorReason" was deleted',
    ),
    "move an existing field into a oneof": (
        [
            (
                "sample.proto",
                "  string output = 9 [(google.api.field_behavior) = OUTPUT_ONLY];\n",
                "  oneof answer {\n    string output = 9;\n  }\n",
            )
        ],
        'Field "9" with name "output" on message "Sample" moved from outside to inside a oneof',
    ),
    "rename an RPC": (
        [("service.proto", "rpc GetRun(", "rpc FetchRun(")],
        'Previously present RPC "GetRun" on service "EvaluationService" was deleted',
    ),
    "rename a field": (
        [("dataset.proto", "string prompt_template = 7", "string template = 7")],
        'Field "7" on message "Dataset" changed name from "prompt_template" to "template"',
    ),
}

# The worked example of docs/CONTRACT.md: a new task type is a new enum value, a new
# payload message and a new member of TaskEvaluationResult.payload. The shell's fields
# are untouched. test_contract_doc.py checks that the document shows these exact texts.
NEW_TASK_TYPE: list[Edit] = [
    (
        "enums.proto",
        "  TASK_TYPE_STRUCTURED_OUTPUT = 9;\n",
        "  TASK_TYPE_STRUCTURED_OUTPUT = 9;\n"
        "  // Tool-using agents judged by whether they reached the task's goal state.\n"
        "  TASK_TYPE_AGENT = 10;\n",
    ),
    (
        "payloads.proto",
        "  // Samples that matched.\n  int64 correct = 3;\n}\n",
        "  // Samples that matched.\n  int64 correct = 3;\n}\n"
        "\n"
        "// Agents: each sample is a trajectory of tool calls ending in a goal check.\n"
        "message AgentPayload {\n"
        "  // Fraction of samples that reached the goal state.\n"
        "  double success_rate = 1;\n"
        "  // Tool calls that failed, over all samples.\n"
        "  int64 tool_errors = 2;\n"
        "  // The worst samples, at most a server-configured few.\n"
        "  repeated WorstExample worst_examples = 3;\n"
        "}\n",
    ),
    (
        "result.proto",
        "    StructuredOutputPayload structured_output = 28;\n",
        "    StructuredOutputPayload structured_output = 28;\n"
        "    // Set for TASK_TYPE_AGENT.\n"
        "    AgentPayload agent = 29;\n",
    ),
]

COMPATIBLE_EDITS: dict[str, list[Edit]] = {
    "add a task type with its payload member": NEW_TASK_TYPE,
    "add a field": [
        (
            "result.proto",
            "  google.protobuf.Duration scoring_time = 19;\n",
            "  google.protobuf.Duration scoring_time = 19;\n"
            "  // Responses served from a cache instead of the provider.\n"
            "  int64 cached_responses = 999;\n",
        )
    ],
}


def _workspace_copy(tmp_path: Path) -> Path:
    """A copy of the buf workspace (buf.yaml, proto/, third_party/) under ``tmp_path``."""
    root = tmp_path / "workspace"
    root.mkdir()
    shutil.copy2(REPO_ROOT / "buf.yaml", root / "buf.yaml")
    shutil.copytree(REPO_ROOT / "proto", root / "proto")
    shutil.copytree(REPO_ROOT / "third_party", root / "third_party")
    return root


def _apply(root: Path, edits: list[Edit]) -> None:
    for name, old, new in edits:
        path = root / "proto" / "evald" / "v1" / name
        text = path.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"edit anchor not found exactly once in {name}: {old!r}"
        path.write_text(text.replace(old, new), encoding="utf-8")


def _gate(root: Path, *checks: str) -> tuple[int, str]:
    against = BASELINES[-1]
    args = ["--root", str(root), "--against", str(against)]
    for check in checks:
        args += ["--check", check]
    done = run_gate(*args)
    return done.returncode, done.stdout + done.stderr


def test_unmodified_copy_passes(tmp_path: Path) -> None:
    rc, output = _gate(_workspace_copy(tmp_path), "breaking")
    assert rc == 0, output


@pytest.mark.parametrize("edit", sorted(BREAKING_EDITS))
def test_breaking_edit_fails_the_gate(tmp_path: Path, edit: str) -> None:
    root = _workspace_copy(tmp_path)
    edits, expected_violation = BREAKING_EDITS[edit]
    _apply(root, edits)
    rc, output = _gate(root, "breaking")
    assert rc == 1, output
    assert "contract gate: breaking FAILED" in output
    assert expected_violation in output


@pytest.mark.parametrize("edit", sorted(COMPATIBLE_EDITS))
def test_compatible_edit_passes_the_gate(tmp_path: Path, edit: str) -> None:
    root = _workspace_copy(tmp_path)
    _apply(root, COMPATIBLE_EDITS[edit])
    rc, output = _gate(root, "lint", "format", "breaking")
    assert rc == 0, output
    assert "contract gate: all checks passed" in output


def test_lint_and_format_failures_fail_the_gate(tmp_path: Path) -> None:
    root = _workspace_copy(tmp_path)
    _apply(root, [("enums.proto", "TASK_TYPE_QA = 2;", "QA   =   2;")])
    rc, output = _gate(root, "lint", "format")
    assert rc == 1, output
    assert "contract gate: lint     FAILED" in output
    assert 'Enum value name "QA" should be prefixed with "TASK_TYPE_"' in output
    assert "contract gate: format   FAILED" in output


def _with_release_files(root: Path) -> Path:
    """Add the generated code and the baselines to a workspace copy."""
    shutil.copytree(
        REPO_ROOT / "clients" / "evald",
        root / "clients" / "evald",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copytree(BASELINES[0].parent, root / "contract_tests" / "baselines")
    return root


def test_codegen_drift_is_caught_and_named(tmp_path: Path) -> None:
    root = _with_release_files(_workspace_copy(tmp_path))
    generated = root / "clients" / "evald"
    rc, output = _gate(root, "codegen")
    assert rc == 0, output

    with (generated / "v1" / "run_pb2.pyi").open("a", encoding="utf-8") as stub:
        stub.write("# a hand edit\n")
    (generated / "v1" / "sample_pb2.py").unlink()
    (generated / "v1" / "leftover_pb2.py").write_text("", encoding="utf-8")
    rc, output = _gate(root, "codegen")
    assert rc == 1, output
    assert "differs: evald/v1/run_pb2.pyi" in output
    assert "missing (not committed): evald/v1/sample_pb2.py" in output
    assert "stale (no longer generated): evald/v1/leftover_pb2.py" in output


def test_cut_baseline_releases_a_version(tmp_path: Path) -> None:
    root = _with_release_files(_workspace_copy(tmp_path))
    baselines = root / "contract_tests" / "baselines"

    # The next two patch releases after the newest baseline.
    major, minor, patch = (int(p) for p in BASELINES[-1].stem.removeprefix("evald-v").split("."))
    first, second = f"{major}.{minor}.{patch + 1}", f"{major}.{minor}.{patch + 2}"
    done = run_gate("--root", str(root), "--cut-baseline", first)
    assert done.returncode == 0, done.stdout + done.stderr
    image = baselines / f"evald-v{first}.binpb"
    assert baseline_pool(image).FindMessageTypeByName("evald.v1.TaskEvaluationResult")
    v1_init = (root / "clients" / "evald" / "v1" / "__init__.py").read_text(encoding="utf-8")
    assert f'CONTRACT_VERSION = "{first}"' in v1_init
    assert _gate(root, "codegen")[0] == 0  # the cut left the generated code in sync

    done = run_gate("--root", str(root), "--cut-baseline", first)
    assert done.returncode == 2
    assert f"{first} is not newer than evald-v{first}.binpb" in done.stderr

    _apply(root, BREAKING_EDITS["rename an RPC"][0])
    done = run_gate("--root", str(root), "--cut-baseline", second)
    assert done.returncode == 2
    assert "contract gate: breaking FAILED" in done.stdout
    assert "no baseline written" in done.stderr
    assert not (baselines / f"evald-v{second}.binpb").exists()


def test_results_name_the_contract_version_the_server_speaks() -> None:
    # Provenance.contract_version is written by the engine, which must not import the
    # generated code: a release bumps it by hand beside --cut-baseline (docs/CONTRACT.md).
    from evald import v1
    from evald_server.engine import CONTRACT_VERSION

    assert CONTRACT_VERSION == v1.CONTRACT_VERSION
    assert BASELINES[-1].name == f"evald-v{CONTRACT_VERSION}.binpb"
