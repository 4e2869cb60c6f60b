"""A small AST mutation run: how many single-point mutants of a module its tests kill.

    python scripts/mutation_score.py MODULE_PATH TEST [TEST ...] [--timeout 60] [--list]
        [-- PYTEST_OPTION ...]     # e.g. -- -k "not end_to_end"

Each mutant changes one thing: a comparison operator (``<`` ↔ ``<=``, ``==`` ↔ ``!=``,
``in`` ↔ ``not in``, ``is`` ↔ ``is not``), an arithmetic operator (``+`` ↔ ``-``,
``*`` ↔ ``/``), ``and`` ↔ ``or``, a dropped ``not``, a number constant (``n`` → ``n + 1``),
or a boolean constant. Docstrings and other strings are left alone. The mutated module
is written into a copy of ``service/`` placed first on ``PYTHONPATH`` (the work tree is
never touched), and the given tests run against it with ``pytest -x``; a mutant is
*killed* when they fail, *survives* when they pass, and counts as killed on a timeout.
Survivors are printed with their line so that equivalent ones can be judged by hand.
"""

import argparse
import ast
import copy
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVICE = ROOT / "service"

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
}


@dataclass(frozen=True)
class Mutant:
    index: int  # the n-th mutable point of the module, in walk order
    line: int
    description: str


def _points(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in _COMPARE_SWAPS:
                    yield node, f"compare:{i}"
        elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
            yield node, "binop"
        elif isinstance(node, ast.BoolOp):
            yield node, "boolop"
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, "not"
        elif isinstance(node, ast.Constant) and id(node) not in docstrings:
            if isinstance(node.value, bool):
                yield node, "bool"
            elif isinstance(node.value, int | float):
                yield node, "number"


def _mutate(node: ast.AST, kind: str) -> str:
    if kind.startswith("compare:"):
        assert isinstance(node, ast.Compare)
        i = int(kind.split(":")[1])
        old = type(node.ops[i])
        node.ops[i] = _COMPARE_SWAPS[old]()
        return f"{old.__name__} -> {type(node.ops[i]).__name__}"
    if kind == "binop":
        assert isinstance(node, ast.BinOp)
        old_op = type(node.op)
        node.op = _BINOP_SWAPS[old_op]()
        return f"{old_op.__name__} -> {type(node.op).__name__}"
    if kind == "boolop":
        assert isinstance(node, ast.BoolOp)
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return f"-> {type(node.op).__name__}"
    if kind == "not":
        return "drop not"
    assert isinstance(node, ast.Constant)
    if kind == "bool":
        node.value = not node.value
        return f"{not node.value} -> {node.value}"
    old = node.value
    node.value = old + 1
    return f"{old!r} -> {node.value!r}"


class _DropNot(ast.NodeTransformer):
    def __init__(self, target: ast.AST) -> None:
        self.target = target

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if node is self.target:
            return node.operand
        return self.generic_visit(node)


def mutants(source: str) -> Iterator[tuple[Mutant, str]]:
    """Every single-point mutant of ``source``: (what changed, the mutated source)."""
    base = ast.parse(source)
    count = len(list(_points(base)))
    for index in range(count):
        tree = copy.deepcopy(base)
        node, kind = list(_points(tree))[index]
        description = _mutate(node, kind)
        if kind == "not":
            tree = _DropNot(node).visit(tree)
        ast.fix_missing_locations(tree)
        yield Mutant(index, getattr(node, "lineno", 0), description), ast.unparse(tree)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/mutation_score.py")
    parser.add_argument("module", type=Path, help="e.g. service/evald_server/engine/_x.py")
    parser.add_argument("tests", nargs="+", help="pytest paths or node ids to run")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    args = parser.parse_args(argv)
    module = args.module.resolve()
    relative = module.relative_to(SERVICE)
    source = module.read_text()
    all_mutants = list(mutants(source))
    if args.list:
        for mutant, _ in all_mutants:
            print(f"{mutant.index:4} line {mutant.line:4}: {mutant.description}")
        return 0
    survivors: list[Mutant] = []
    with tempfile.TemporaryDirectory(prefix="mutation-overlay-") as tmp:
        overlay = Path(tmp) / "service"
        shutil.copytree(SERVICE, overlay, ignore=shutil.ignore_patterns("__pycache__"))
        target = overlay / relative
        env = {
            **os.environ,
            "PYTHONPATH": f"{overlay}{os.pathsep}{ROOT}",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        for mutant, mutated in all_mutants:
            target.write_text(mutated)
            command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
            try:
                done = subprocess.run(
                    [*command, *extra, *args.tests],
                    cwd=ROOT,
                    env=env,
                    capture_output=True,
                    timeout=args.timeout,
                    check=False,
                )
                killed = done.returncode != 0
            except subprocess.TimeoutExpired:
                killed = True
            status = "killed" if killed else "SURVIVED"
            print(f"{mutant.index:4} line {mutant.line:4}: {mutant.description:<24} {status}")
            sys.stdout.flush()
            if not killed:
                survivors.append(mutant)
        target.write_text(source)
    total = len(all_mutants)
    killed_count = total - len(survivors)
    score = killed_count / total * 100 if total else 100.0
    print(f"\n{relative}: {killed_count}/{total} mutants killed ({score:.0f} %)")
    for mutant in survivors:
        print(f"  survived: line {mutant.line}: {mutant.description}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
