"""A small AST mutation tester: which changes to a module do its tests fail to notice?

    .venv/bin/python scripts/mutate.py service/evald_server/engine/_limits.py \\
        -- tests/engine/test_units.py tests/engine/test_limit_slots.py
    .venv/bin/python scripts/mutate.py MODULE --list -- TESTS   # the mutants, not run

Each mutant changes one thing: a comparison (``<`` → ``<=``, ``==`` → ``!=``, ``in`` →
``not in``, ``is`` → ``is not``), an arithmetic or augmented operator (``+`` ↔ ``-``),
a boolean operator (``and`` ↔ ``or``), a dropped ``not``, an integer constant (n → n+1,
1 → 0), ``True`` ↔ ``False``, a subtask state literal inside SQL text (``'pending'`` ↔
``'failed'``, ``'running'`` → ``'pending'``), a ``return X`` → ``return None``, or one
statement removed (replaced by ``pass``). Docstrings are left alone.

The mutants run in a copy of ``service/`` and ``tests/`` (taken at the start, so that
editing the working tree meanwhile cannot skew the run) whose ``service/`` shadows the
editable install through ``PYTHONPATH`` (servers the tests start as child processes
see it too); the working tree is never touched. A mutant is *killed* when the tests
fail (or run past ``--timeout``), *survived* otherwise. The score is killed / all;
equivalent mutants must be judged by reading the survivors, which are listed.
"""

import argparse
import ast
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
}
_SQL_SWAPS = (("'pending'", "'failed'"), ("'failed'", "'pending'"), ("'running'", "'pending'"))


@dataclass(frozen=True)
class Mutant:
    index: int
    line: int
    description: str


class _Mutator(ast.NodeTransformer):
    """Counts mutation sites; when ``target`` is set, applies that one site only."""

    def __init__(self, target: int | None = None) -> None:
        self.target = target
        self.sites: list[Mutant] = []
        self._docstrings: set[int] = set()

    def _site(self, node: ast.AST, description: str) -> bool:
        index = len(self.sites)
        self.sites.append(Mutant(index, getattr(node, "lineno", 0), description))
        return index == self.target

    def visit_Module(self, node: ast.Module) -> ast.AST:
        self._mark_docstrings(node)
        return self.generic_visit(node)

    def _mark_docstrings(self, node: ast.AST) -> None:
        for child in ast.walk(node):
            body = getattr(child, "body", None)
            first = body[0] if isinstance(body, list) and body else None
            if isinstance(first, ast.Expr) and _is_text(first.value):
                self._docstrings.add(id(first))

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        for i, op in enumerate(node.ops):
            swap = _COMPARE_SWAPS.get(type(op))
            if swap is not None and self._site(node, f"{type(op).__name__} -> {swap.__name__}"):
                node.ops[i] = swap()
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        swap = _BINOP_SWAPS.get(type(node.op))
        formatting = _is_string_format(node)
        if (
            swap
            and not formatting
            and self._site(node, f"{type(node.op).__name__} -> {swap.__name__}")
        ):
            node.op = swap()
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        swap = _BINOP_SWAPS.get(type(node.op))
        if swap is not None and self._site(node, f"{type(node.op).__name__}= -> {swap.__name__}="):
            node.op = swap()
        return node

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.AST:
        self.generic_visit(node)
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        if self._site(node, f"{type(node.op).__name__} -> {other.__name__}"):
            node.op = other()
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and self._site(node, "drop not"):
            return node.operand
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        value = node.value
        if isinstance(value, bool):
            if self._site(node, f"{value} -> {not value}"):
                return ast.copy_location(ast.Constant(not value), node)
        elif isinstance(value, int):
            new = 0 if value == 1 else value + 1
            if self._site(node, f"{value} -> {new}"):
                return ast.copy_location(ast.Constant(new), node)
        elif isinstance(value, str):
            for old, new_text in _SQL_SWAPS:
                if old in value and self._site(node, f"SQL {old} -> {new_text}"):
                    return ast.copy_location(ast.Constant(value.replace(old, new_text, 1)), node)
        return node

    def visit_Return(self, node: ast.Return) -> ast.AST:
        self.generic_visit(node)
        returns_none = node.value is None or (
            isinstance(node.value, ast.Constant) and node.value.value is None
        )
        if not returns_none and self._site(node, "return X -> return None"):
            node.value = ast.Constant(None)
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field, old in ast.iter_fields(node):
            if isinstance(old, list) and old and all(isinstance(s, ast.stmt) for s in old):
                new_body: list[ast.stmt] = []
                for stmt in old:
                    mutated = self._statement(stmt)
                    if mutated is not None:
                        new_body.append(mutated)
                setattr(node, field, new_body or [ast.Pass()])
            elif isinstance(old, list):
                new_values = []
                for value in old:
                    if isinstance(value, ast.AST):
                        value = self.visit(value)
                    new_values.append(value)
                setattr(node, field, new_values)
            elif isinstance(old, ast.AST):
                setattr(node, field, self.visit(old))
        return node

    def _statement(self, stmt: ast.stmt) -> ast.stmt | None:
        skip = id(stmt) in self._docstrings or isinstance(stmt, _KEPT_STATEMENTS)
        if not skip and self._site(stmt, f"delete {type(stmt).__name__}"):
            return ast.copy_location(ast.Pass(), stmt)
        visited = self.visit(stmt)
        assert isinstance(visited, ast.stmt)
        return visited


_KEPT_STATEMENTS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.Pass,
    ast.Global,
    ast.Nonlocal,
)


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _is_string_format(node: ast.BinOp) -> bool:
    return _is_text(node.left) or _is_text(node.right)


def mutants(source: str) -> list[Mutant]:
    mutator = _Mutator()
    mutator.visit(ast.parse(source))
    return mutator.sites


def mutate(source: str, index: int) -> str:
    tree = ast.parse(source)
    mutator = _Mutator(index)
    mutated = mutator.visit(copy.deepcopy(tree))
    ast.fix_missing_locations(mutated)
    return ast.unparse(mutated)


def _run_tests(shadow: Path, tests: list[str], timeout_s: float) -> str:
    path = f"{shadow / 'service'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    env = {**os.environ, "PYTHONPATH": path}
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    try:
        done = subprocess.run(
            command, cwd=shadow, env=env, capture_output=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        return "killed (timeout)"
    return "survived" if done.returncode == 0 else "killed"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/mutate.py")
    parser.add_argument("module", type=Path, help="a module under service/")
    parser.add_argument("tests", nargs="+", help="pytest arguments (after --)")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--only", type=int, nargs="*", help="run only these mutant indexes")
    args = parser.parse_args(argv)
    module = args.module.resolve()
    relative = module.relative_to(ROOT / "service")
    source = module.read_text()
    found = mutants(source)
    if args.list:
        for m in found:
            print(f"#{m.index} line {m.line}: {m.description}")
        return 0
    chosen = [m for m in found if args.only is None or m.index in args.only]
    with tempfile.TemporaryDirectory(prefix="evald-mutants-") as tmp:
        shadow = Path(tmp)
        ignore = shutil.ignore_patterns("__pycache__")
        for tree in ("service", "tests"):
            shutil.copytree(ROOT / tree, shadow / tree, ignore=ignore)
        shutil.copy(ROOT / "pyproject.toml", shadow / "pyproject.toml")
        target = shadow / "service" / relative
        baseline = _run_tests(shadow, args.tests, args.timeout)
        if baseline != "survived":
            print(f"the tests fail without any mutant ({baseline}); fix that first")
            return 2
        results: dict[str, list[Mutant]] = {"killed": [], "survived": []}
        started = time.monotonic()
        for m in chosen:
            target.write_text(mutate(source, m.index))
            outcome = _run_tests(shadow, args.tests, args.timeout)
            target.write_text(source)
            results["survived" if outcome == "survived" else "killed"].append(m)
            print(f"#{m.index:3d} line {m.line:4d} {m.description:32s} {outcome}", flush=True)
    killed, survived = len(results["killed"]), len(results["survived"])
    total = killed + survived
    print(
        f"\n{relative}: {killed}/{total} mutants killed ({killed / max(total, 1):.0%}) "
        f"in {time.monotonic() - started:.0f} s"
    )
    for m in results["survived"]:
        print(f"  survived #{m.index} line {m.line}: {m.description}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
