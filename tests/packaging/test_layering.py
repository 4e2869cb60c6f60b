"""The server's layers, checked on the source (an ``ast`` walk, no import needed).

A package imports only packages of a lower layer, never a private module (``_x``) of
another package, and only the API adapter speaks gRPC or ``evald.v1``. Each package's
``__all__`` is its surface: this contract replaces pinning those lists by hand.

    api                       the gRPC adapter (proto ⇄ application objects)
    metrics                   the Prometheus endpoint, over the application
    app                       the use cases: runs, datasets, comparisons
    engine | comparison       dispatch, retries, scoring of tasks | paired statistics
    store | providers | scoring | code_tasks   persistence | model calls | metrics of
                              samples | code records, programs from answers, verdicts
    datasets | sandbox        record schemas, parsing, prompts | running code isolated
    domain | config           shared vocabulary and rules | the server's configuration

Inside ``store``: two dialects, ``store.sqlite`` and ``store.postgres``, never import each
other, and the neutral middle (the port, the records, the row decoders, the planners)
imports neither; only the package's front (``__init__``, ``_openers``) picks a dialect.
"""

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
_SERVER = _ROOT / "service" / "evald_server"
_CLIENTS = _ROOT / "clients"

LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"domain", "config"}),
    frozenset({"datasets", "sandbox"}),
    frozenset({"store", "providers", "scoring", "code_tasks"}),
    frozenset({"engine", "comparison"}),
    frozenset({"app"}),
    frozenset({"metrics"}),
    frozenset({"api"}),
)
_RANK = {package: rank for rank, layer in enumerate(LAYERS) for package in layer}

# The store's dialects, and the modules of the store that may import one: its public
# surface (the embedded store) and the opener that maps a URL scheme to a dialect.
_DIALECTS = ("sqlite", "postgres")
_STORE_FRONT = frozenset({"evald_server.store", "evald_server.store._openers"})

# Outside the layers: a stand-alone fake model server for tests and benchmarks, which
# shares only the configuration's vocabulary; nothing in the server imports it.
_ASIDE = {"fake_provider": frozenset({"config", "domain"})}

_WIRE = ("grpc", "grpc_reflection", "grpc_health", "evald", "google.protobuf", "google.rpc")
# The CLI's contract command compares the server's wire descriptors (fetched by
# reflection) with its own: wire-level by nature, so it speaks gRPC itself.
_CLI_WIRE_MODULES = frozenset({"evald_cli._contract", "evald_cli._reflection"})
# ``evald serve`` runs the server where it is installed, importing it only then (the
# other commands work on a client-only machine).
_CLI_SERVER_MODULES = frozenset({"evald_cli._serve"})


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, dotted
    line: int


def _imports(source_root: Path, package_root: Path) -> Iterator[Import]:
    for path in sorted(package_root.rglob("*.py")):
        relative = path.relative_to(source_root).with_suffix("")
        parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
        module = ".".join(parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(module, alias.name, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{module}:{node.lineno}: use absolute imports"
                assert node.module is not None
                yield Import(module, node.module, node.lineno)
                for alias in node.names:  # `from evald_server.x import _y` is a module too
                    if alias.name.startswith("_"):
                        yield Import(module, f"{node.module}.{alias.name}", node.lineno)


def _server_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "evald_server" and len(parts) > 1 else None


def _is_wire(target: str) -> bool:
    return any(target == w or target.startswith(w + ".") for w in _WIRE)


def _store_dialect(module: str) -> str | None:
    """The dialect a module of ``store`` belongs to (None: the neutral middle)."""
    parts = module.split(".")
    if parts[:2] != ["evald_server", "store"] or len(parts) < 3:
        return None
    return parts[2] if parts[2] in _DIALECTS else None


def _store_violation(imp: Import) -> str | None:
    """Within ``store``: a dialect importing the other, or the middle importing one."""
    target = _store_dialect(imp.target)
    if target is None:
        return None
    own = _store_dialect(imp.module)
    if own is None and imp.module not in _STORE_FRONT:
        return "the neutral store modules import neither dialect"
    if own is not None and own != target:
        return "the store's dialects never import each other"
    return None


def server_violations(imports: list[Import]) -> list[str]:
    found = []
    for imp in imports:
        where = f"{imp.module}:{imp.line} imports {imp.target}"
        own = _server_package(imp.module)
        if own is None:
            continue  # evald_server/__init__.py
        if own == "store" and (problem := _store_violation(imp)) is not None:
            found.append(f"{where}: {problem}")
        if _is_wire(imp.target) and own != "api":
            found.append(f"{where}: only the api package speaks gRPC / evald.v1")
        other = _server_package(imp.target)
        if other is None or other == own:
            continue
        private = imp.target.split(".")[2:3]
        if private and private[0].startswith("_"):
            found.append(f"{where}: a private module of another package")
        if own in _ASIDE:
            if other not in _ASIDE[own]:
                found.append(f"{where}: {own} may import only {sorted(_ASIDE[own])}")
        elif other in _ASIDE:
            found.append(f"{where}: the server never imports {other}")
        elif other not in _RANK or own not in _RANK:
            found.append(f"{where}: {other if other not in _RANK else own} has no layer")
        elif _RANK[other] >= _RANK[own]:
            found.append(f"{where}: {own} may import only lower layers, not {other}")
    return found


def client_violations(imports: list[Import]) -> list[str]:
    found = []
    for imp in imports:
        where = f"{imp.module}:{imp.line} imports {imp.target}"
        top = imp.module.split(".")[0]
        if imp.target.split(".")[0] == "evald_server" and imp.module not in _CLI_SERVER_MODULES:
            found.append(f"{where}: the clients never import the server")
        if top == "evald_cli" and _is_wire(imp.target) and imp.module not in _CLI_WIRE_MODULES:
            found.append(f"{where}: the CLI goes through the SDK, not gRPC")
        if top == "evald_client" and imp.target.split(".")[0] == "evald_cli":
            found.append(f"{where}: the SDK never imports the CLI")
        if (
            imp.target.split(".")[0] in ("evald_client", "evald_cli")
            and imp.target.split(".")[0] != top
            and any(p.startswith("_") for p in imp.target.split(".")[1:])
        ):
            found.append(f"{where}: a private module of another package")
    return found


def test_every_server_package_has_a_layer() -> None:
    packages = {p.name for p in _SERVER.iterdir() if (p / "__init__.py").exists()}
    assert packages == set(_RANK) - {"config"} | set(_ASIDE)
    assert (_SERVER / "config.py").exists()


def test_the_server_keeps_its_layers() -> None:
    assert server_violations(list(_imports(_ROOT / "service", _SERVER))) == []


def test_the_clients_keep_theirs() -> None:
    imports = [
        imp
        for package in ("evald_client", "evald_cli")
        for imp in _imports(_CLIENTS, _CLIENTS / package)
    ]
    assert client_violations(imports) == []


@pytest.mark.parametrize(
    ("module", "target", "why"),
    [
        ("evald_server.store.sqlite._store", "evald_server.engine", "lower layers"),
        ("evald_server.datasets._chat", "evald_server.domain._messages", "private"),
        ("evald_server.engine._lanes", "evald_server.store", None),
        ("evald_server.scoring._pool", "grpc", "speaks gRPC"),
        ("evald_server.app._runs", "evald_server.api", "lower layers"),
        ("evald_server.engine._engine", "evald_server.fake_provider", "never imports"),
        ("evald_server.store.sqlite._store", "evald_server.comparison", "lower layers"),
        # The store's dialects and its neutral middle.
        ("evald_server.store.postgres._work", "evald_server.store.sqlite._common", "each other"),
        ("evald_server.store.sqlite._runs", "evald_server.store.postgres", "each other"),
        ("evald_server.store._plans", "evald_server.store.sqlite._common", "neither dialect"),
        ("evald_server.store._rows", "evald_server.store.postgres._common", "neither dialect"),
        ("evald_server.store._port", "evald_server.store.sqlite", "neither dialect"),
        ("evald_server.store._outcomes", "evald_server.store.postgres._work", "neither dialect"),
        ("evald_server.store.sqlite._work", "evald_server.store._plans", None),
        ("evald_server.store.postgres._runs", "evald_server.store.postgres._common", None),
        ("evald_server.store._openers", "evald_server.store.postgres", None),
        ("evald_server.store", "evald_server.store.sqlite", None),
    ],
)
def test_the_rules_catch_what_they_forbid(module: str, target: str, why: str | None) -> None:
    found = server_violations([Import(module, target, 1)])
    if why is None:
        assert found == []
    else:
        assert len(found) == 1
        assert why in found[0]


@pytest.mark.parametrize("package", sorted(set(_RANK) - {"config"} | set(_ASIDE)))
def test_each_exported_name_exists(package: str) -> None:
    module = importlib.import_module(f"evald_server.{package}")
    exported = getattr(module, "__all__", [])
    assert exported, f"evald_server.{package} declares its surface in __all__"
    missing = [name for name in exported if not hasattr(module, name)]
    assert missing == []


def test_the_server_and_the_cli_announce_readiness_alike() -> None:
    # Two constants because the CLI may not import the server; one line on the wire.
    from evald_cli._serve import READY_PREFIX as cli_prefix
    from evald_server.api import READY_PREFIX as server_prefix

    assert cli_prefix == server_prefix == "evald listening on "


def test_the_postgres_dialect_is_imported_only_when_asked_for() -> None:
    # Its driver is an extra: the server and the embedded store run without it.
    code = (
        "import sys, evald_server.api, evald_server.store; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] == 'asyncpg' "
        "or m.startswith('evald_server.store.postgres')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout
