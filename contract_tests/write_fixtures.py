"""Write the frozen fixtures of one contract version: ``fixtures/v<VERSION>/``.

Each fixture is a representative message (contract_tests/_producer.py) in two
encodings, binary (``.binpb``, deterministic) and canonical proto3 JSON (``.json``),
listed with its message type in ``MANIFEST.json``. Fixtures are written once, when a
contract version is released, and committed; later code must keep reading them
(test_fixtures.py). This script refuses to overwrite a version that exists: a fixture
is never regenerated to make a test pass. Run it from the repository root:

    .venv/bin/python -m contract_tests.write_fixtures --version 1.1.0
"""

import argparse
import json
import sys
from pathlib import Path

from google.protobuf import json_format
from google.protobuf.message import Message

from contract_tests._producer import build_fixtures

FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
MANIFEST = "MANIFEST.json"


def canonical_json(message: Message) -> str:
    """Canonical proto3 JSON (lowerCamelCase names, defaults omitted), sorted keys."""
    return json_format.MessageToJson(message, indent=2, sort_keys=True) + "\n"


def write(version: str, fixtures_dir: Path = FIXTURES_DIR) -> Path:
    """Write every fixture of ``version``; refuse if that version was written before."""
    target = fixtures_dir / f"v{version}"
    if target.exists():
        raise FileExistsError(f"{target} exists: fixtures of a released version are frozen")
    target.mkdir(parents=True)
    types: dict[str, str] = {}
    for name, message in build_fixtures().items():
        (target / f"{name}.binpb").write_bytes(message.SerializeToString(deterministic=True))
        (target / f"{name}.json").write_text(canonical_json(message), encoding="utf-8")
        types[name] = message.DESCRIPTOR.full_name
    manifest = {"contract_version": version, "fixtures": types}
    (target / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the frozen fixtures of a version.")
    parser.add_argument("--version", required=True, help="contract version, e.g. 1.1.0")
    args = parser.parse_args(argv)
    try:
        target = write(args.version)
    except FileExistsError as exc:
        print(f"write_fixtures: {exc}", file=sys.stderr)
        return 1
    print(f"write_fixtures: wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
