"""Every request failure raised with a literal reason agrees with the error table.

``NotFound(ErrorReason.RUN_NOT_RETRYABLE, …)`` — a class whose gRPC code is not the
reason's — raises ``TypeError`` when the line runs, and the caller gets INTERNAL instead
of the graded error. That shows only when the path runs; this reads the source instead:
every call of an ``EvaldError`` class with an ``ErrorReason`` member as its reason is
checked against the table, wherever it is in the server.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import evald_server
from evald_server.domain import ErrorReason, EvaldError, mapping_for

SERVER = Path(evald_server.__file__).parent
_REASON_NAMES = {"ErrorReason", "_R"}  # how modules spell the enum


def _error_classes() -> dict[str, type[EvaldError]]:
    found: dict[str, type[EvaldError]] = {}
    pending: list[type[EvaldError]] = [EvaldError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def _reason_of(call: ast.Call) -> ErrorReason | None:
    """The reason a call passes as a literal ``ErrorReason.X`` (first argument or
    ``reason=``), or None when it passes something else."""
    args = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "reason")]
    for arg in args:
        if (
            isinstance(arg, ast.Attribute)
            and isinstance(arg.value, ast.Name)
            and arg.value.id in _REASON_NAMES
        ):
            return ErrorReason[arg.attr]
    return None


def mismatches(source: str, where: str) -> Iterator[str]:
    """Calls of an error class whose literal reason maps to another gRPC code."""
    classes = _error_classes()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        cls = classes.get(name or "")
        reason = _reason_of(node)
        if cls is None or reason is None or cls.grpc_code is None:
            continue
        code = mapping_for(reason).grpc_code
        if code != cls.grpc_code:
            yield (
                f"{where}:{node.lineno}: {name}({reason.name}) — the table maps "
                f"{reason.name} to {code}, {name} is {cls.grpc_code}"
            )


def _sources() -> Iterator[tuple[Path, str]]:
    for path in sorted(SERVER.rglob("*.py")):
        yield path, path.read_text(encoding="utf-8")


def test_every_literal_reason_raised_agrees_with_the_error_table() -> None:
    problems = [m for path, text in _sources() for m in mismatches(text, str(path))]
    assert problems == []


def test_the_check_sees_the_servers_raises() -> None:
    # A check that matched nothing would pass forever: the server raises dozens.
    classes = _error_classes()
    checked = 0
    for _path, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and _reason_of(node) is not None:
                func = node.func
                name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                checked += name in classes
    assert checked >= 20


def test_a_mismatch_is_named_with_its_line() -> None:
    source = (
        "from evald_server.domain import ErrorReason, NotFound\n"
        "raise NotFound(ErrorReason.RUN_NOT_FOUND, 'fine')\n"
        "raise NotFound(ErrorReason.RUN_NOT_RETRYABLE, 'wrong class')\n"
    )
    assert list(mismatches(source, "x.py")) == [
        "x.py:3: NotFound(RUN_NOT_RETRYABLE) — the table maps RUN_NOT_RETRYABLE to "
        "FAILED_PRECONDITION, NotFound is NOT_FOUND"
    ]
