"""``evald compare`` and ``evald results --baseline`` on real runs of known accuracy:
the gate's verdicts are known in advance."""

import json

import pytest

from tests._shared import run_cli
from tests.comparison._known_runs import KnownRuns


def test_a_significant_drop_beyond_the_threshold_fails_the_gate(
    runs: KnownRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "compare", runs.baseline, runs.weaker, "--server", runs.address,
        "--fail-if-drop", "accuracy=0.05", "--fail-if-drop", "f1=0.05",
    )  # fmt: skip
    assert (code, err) == (3, "")
    assert out.count("REGRESSION colours@1.0.0 sim-60 accuracy: -0.") == 1
    assert out.count("REGRESSION capitals@1.0.0 sim-60 f1: -0.") == 1
    assert "mcnemar_exact" in out
    assert "permutation" in out
    assert "sim-90a → sim-60" in out


@pytest.mark.parametrize(
    ("which", "gate"),
    [
        ("improvement", ["--fail-if-drop", "accuracy=0.01"]),  # the candidate is better
        ("within threshold", ["--fail-if-drop", "accuracy=0.5"]),  # drop ~0.3 < 0.5
        ("no gate", []),  # only named metrics gate
    ],
)
def test_no_regression_exits_zero(
    runs: KnownRuns, capsys: pytest.CaptureFixture[str], which: str, gate: list[str]
) -> None:
    base, cand = (runs.weaker, runs.baseline) if which == "improvement" else (
        runs.baseline, runs.weaker
    )  # fmt: skip
    code, out, err = run_cli(capsys, "compare", base, cand, "--server", runs.address, *gate)
    assert (code, err) == (0, "")
    assert "REGRESSION" not in out


def test_the_same_accuracy_passes_a_zero_threshold(
    runs: KnownRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    # Equal true accuracy: a drop is only noise, and noise is not significant at 0.001
    # (fresh simulator draws per session: it could fail once in a thousand sessions).
    code, out, _ = run_cli(capsys, "compare", runs.baseline, runs.peer, "--server", runs.address,
        "--fail-if-drop", "accuracy=0", "--alpha", "0.001", "--json",
    )  # fmt: skip
    assert code == 0
    document = json.loads(out)
    assert document["regressions"] == []
    assert document["gate"] == {"alpha": 0.001, "fail_if_drop": {"accuracy": 0.0}}
    tasks = document["comparison"]["tasks"]
    assert [t["dataset_name"] for t in tasks] == ["colours", "capitals"]
    assert {m["test"] for t in tasks for m in t["metrics"]} == {"mcnemar_exact", "permutation"}


def test_json_lists_the_regressions(runs: KnownRuns, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "compare", runs.baseline, runs.weaker, "--server", runs.address,
        "--fail-if-drop", "exact_match=0.1", "--json",
    )  # fmt: skip
    assert code == 3
    (regression,) = json.loads(out)["regressions"]
    assert regression["dataset"] == "capitals"
    assert regression["metric"] == "exact_match"
    assert regression["delta"] < -0.1
    assert regression["p_value"] < 0.05


def test_gate_mistakes_are_errors_not_passes(
    runs: KnownRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "compare", runs.baseline, runs.weaker, "--server", runs.address,
        "--fail-if-drop", "acuracy=0.01",
    )  # fmt: skip
    assert code == 1
    assert "--fail-if-drop names acuracy, which no compared task has" in err
    code, _, err = run_cli(capsys, "compare", runs.baseline, runs.weaker, "--fail-if-drop", "x")
    assert code == 2
    assert "is not METRIC=THRESHOLD" in err
    code, _, err = run_cli(capsys, "compare", runs.baseline, runs.weaker, "--alpha", "1.5")
    assert code == 2


def test_results_with_a_baseline_shows_deltas_inline(
    runs: KnownRuns, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_cli(
        capsys, "results", runs.weaker, "--baseline", runs.baseline, "--server", runs.address
    )
    assert (code, err) == (0, "")
    assert out.count("Δ -0.") >= 4  # accuracy and the macro metrics, exact match and f1
    assert "*" in out  # significant drops are marked
