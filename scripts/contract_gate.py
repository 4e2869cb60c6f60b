"""The contract gate (``make contract``): what CI checks before evald.v1 may change.

Checks, each run even when an earlier one failed; the exit status is 1 if any failed:

    lint      buf lint: STANDARD rules on proto/ (vendored googleapis excluded)
    format    buf format proto --diff --exit-code: evald's protos are buf-formatted
    breaking  buf breaking proto --against <newest released baseline> (FILE rules)
    codegen   scripts/gen_protos.py reproduces the committed clients/evald byte for byte

Releasing a contract version freezes it as a baseline image that later changes are
checked against (the checks run first; the image is written only if all pass, then the
generated code is refreshed so that evald.v1.CONTRACT_VERSION names the new version):

    python scripts/contract_gate.py --cut-baseline 1.1.0

Works offline: buf needs no registry (googleapis is vendored in third_party/).
"""

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import gen_protos

ROOT = gen_protos.ROOT
BASELINES_DIR = gen_protos.BASELINES_DIR
CHECKS = ("lint", "format", "breaking", "codegen")

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")
_BUF_TIMEOUT_S = 120


class GateError(Exception):
    """The gate cannot run or cannot release (no buf, buf hung, a bad --cut-baseline)."""


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    ok: bool
    detail: str = ""


def buf_binary() -> str:
    """The buf of this virtual environment (buf-bin), else the one on PATH."""
    beside_python = Path(sys.executable).parent / "buf"
    if beside_python.is_file():
        return str(beside_python)
    found = shutil.which("buf")
    if found is None:
        raise GateError("buf not found: run `make venv` (the buf-bin package provides it)")
    return found


def newest_baseline(baselines_dir: Path) -> Path | None:
    """The baseline image of the highest released version, if any."""
    released = gen_protos.released_baselines(baselines_dir)
    return released[-1][1] if released else None


def _run_buf(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [buf_binary(), *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=_BUF_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GateError(f"buf {args[0]} did not finish in {_BUF_TIMEOUT_S} s") from exc


def _buf_check(name: str, root: Path, *args: str) -> CheckResult:
    done = _run_buf(root, *args)
    output = (done.stdout + done.stderr).strip()
    return CheckResult(name, done.returncode == 0, output)


def check_lint(root: Path, against: Path | None) -> CheckResult:
    return _buf_check("lint", root, "lint")


def check_format(root: Path, against: Path | None) -> CheckResult:
    result = _buf_check("format", root, "format", "proto", "--diff", "--exit-code")
    if result.ok:
        return result
    return CheckResult("format", False, f"{result.detail}\nfix: .venv/bin/buf format -w proto")


def check_breaking(root: Path, against: Path | None) -> CheckResult:
    if against is None:
        return CheckResult(
            "breaking",
            False,
            f"no baseline image under {BASELINES_DIR}: release one with --cut-baseline",
        )
    # Imports (google/*) are excluded: the gate guards evald's files, not the vendored ones.
    args = ("breaking", "proto", "--against", str(against.resolve()), "--exclude-imports")
    result = _buf_check("breaking", root, *args)
    header = f"against {against.name}"
    return CheckResult("breaking", result.ok, f"{header}\n{result.detail}".strip())


def check_codegen(root: Path, against: Path | None) -> CheckResult:
    committed = root / gen_protos.CLIENTS_DIR
    with tempfile.TemporaryDirectory(prefix="evald-drift-") as scratch:
        fresh = Path(scratch)
        try:
            produced = set(gen_protos.generate(fresh, root))
        except gen_protos.GenerationError as exc:
            return CheckResult("codegen", False, str(exc))
        present = set(gen_protos.generated_files(committed))
        problems = [f"missing (not committed): {path}" for path in sorted(produced - present)]
        problems += [f"stale (no longer generated): {path}" for path in sorted(present - produced)]
        problems += [
            f"differs: {path}"
            for path in sorted(produced & present)
            if not filecmp.cmp(fresh / path, committed / path, shallow=False)
        ]
    if problems:
        problems.append("fix: make proto, then commit clients/evald with the protos")
        return CheckResult("codegen", False, "\n".join(problems))
    return CheckResult("codegen", True, f"{len(produced)} generated files up to date")


_CHECK_FUNCS: dict[str, Callable[[Path, Path | None], CheckResult]] = {
    "lint": check_lint,
    "format": check_format,
    "breaking": check_breaking,
    "codegen": check_codegen,
}


def run_checks(root: Path, against: Path | None, checks: Sequence[str]) -> list[CheckResult]:
    """Run ``checks`` in order, printing each result as it comes."""
    results = []
    for name in checks:
        result = _CHECK_FUNCS[name](root, against)
        print(f"contract gate: {name:<9}{'ok' if result.ok else 'FAILED'}", flush=True)
        if result.detail and not result.ok:
            for line in result.detail.splitlines():
                print(f"    {line}")
        results.append(result)
    return results


def cut_baseline(root: Path, version: str) -> Path:
    """Release ``version``: after every check passes, write its baseline image and
    regenerate clients/evald so that CONTRACT_VERSION names it."""
    match = _VERSION.match(version)
    if match is None:
        raise GateError(f"--cut-baseline: {version!r} is not MAJOR.MINOR.PATCH, e.g. 1.1.0")
    major, minor, patch = (int(part) for part in match.groups())
    if major != 1:
        raise GateError(
            f"--cut-baseline: {version} is not a v1 version; a breaking change means a new "
            "proto package (evald.v2) with its own baselines"
        )
    baselines = root / BASELINES_DIR
    released = gen_protos.released_baselines(baselines)
    previous = released[-1][1] if released else None
    if released and (major, minor, patch) <= released[-1][0]:
        raise GateError(f"--cut-baseline: {version} is not newer than {released[-1][1].name}")
    checks = CHECKS if previous is not None else tuple(c for c in CHECKS if c != "breaking")
    if not all(result.ok for result in run_checks(root, previous, checks)):
        raise GateError("--cut-baseline: the checks above failed; no baseline written")
    target = baselines / f"evald-v{version}.binpb"
    baselines.mkdir(parents=True, exist_ok=True)
    # Imports are kept so that the image alone loads into a descriptor pool (the
    # old-consumer test); source info is dropped because nothing reads comments from it.
    done = _run_buf(root, "build", "proto", "--exclude-source-info", "-o", str(target.resolve()))
    if done.returncode != 0:
        raise GateError(f"buf build failed:\n{done.stdout}{done.stderr}")
    try:
        gen_protos.generate(root / gen_protos.CLIENTS_DIR, root)
    except gen_protos.GenerationError as exc:
        raise GateError(f"baseline written, but regenerating clients/evald failed: {exc}") from exc
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="buf lint, buf format, buf breaking and the codegen drift check."
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="workspace holding buf.yaml, proto/, third_party/ (default: the repository)",
    )
    parser.add_argument(
        "--against",
        type=Path,
        help="baseline image for the breaking check (default: newest under "
        f"{BASELINES_DIR} of the repository)",
    )
    parser.add_argument(
        "--check",
        action="append",
        choices=CHECKS,
        help="run only this check (repeatable; default: all)",
    )
    parser.add_argument(
        "--cut-baseline",
        metavar="VERSION",
        help="release VERSION: run every check, then write its baseline image",
    )
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.cut_baseline:
            target = cut_baseline(root, args.cut_baseline)
            print(
                f"contract gate: wrote {target.relative_to(root)} and regenerated "
                f"{gen_protos.CLIENTS_DIR / gen_protos.PACKAGE} (CONTRACT_VERSION "
                f"{args.cut_baseline}); commit both with the release"
            )
            return 0
        against = args.against or newest_baseline(ROOT / BASELINES_DIR)
        checks = [name for name in CHECKS if not args.check or name in args.check]
        results = run_checks(root, against, checks)
    except GateError as exc:
        print(f"contract gate: {exc}", file=sys.stderr)
        return 2
    failed = [result.name for result in results if not result.ok]
    if failed:
        print(f"contract gate: FAILED ({', '.join(failed)})")
        return 1
    print("contract gate: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
