"""Paths and helpers shared by the contract tests."""

import functools
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FileDescriptor

REPO_ROOT = Path(__file__).resolve().parent.parent
CONTRACT_DOC = REPO_ROOT / "docs" / "CONTRACT.md"
FIXTURES_DIR = REPO_ROOT / "contract_tests" / "fixtures"
BASELINES = sorted((REPO_ROOT / "contract_tests" / "baselines").glob("evald-v*.binpb"))
GATE = REPO_ROOT / "scripts" / "contract_gate.py"
PROTO_FILES = sorted((REPO_ROOT / "proto" / "evald" / "v1").glob("*.proto"))


def evald_files() -> list[FileDescriptor]:
    """Today's descriptors of every proto/evald/v1 file, from the generated modules."""
    return [importlib.import_module(f"evald.v1.{path.stem}_pb2").DESCRIPTOR for path in PROTO_FILES]


def _nested(message: Descriptor) -> Iterator[Descriptor]:
    yield message
    for nested in message.nested_types:
        yield from _nested(nested)


def evald_messages() -> list[Descriptor]:
    """Every message of evald.v1, nested ones (map entries included) too."""
    return [
        nested
        for file in evald_files()
        for message in file.message_types_by_name.values()
        for nested in _nested(message)
    ]


def evald_enums() -> list[EnumDescriptor]:
    """Every enum of evald.v1, top-level and nested."""
    top = [enum for file in evald_files() for enum in file.enum_types_by_name.values()]
    return top + [enum for message in evald_messages() for enum in message.enum_types]


@functools.cache
def baseline_pool(image: Path) -> descriptor_pool.DescriptorPool:
    """A descriptor pool, separate from the default one, loaded from a baseline image."""
    files = descriptor_pb2.FileDescriptorSet.FromString(image.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:  # buf writes images in dependency order
        pool.Add(file)
    return pool


def run_gate(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the contract gate command as CI does, capturing its output."""
    return subprocess.run(
        [sys.executable, str(GATE), *args],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
