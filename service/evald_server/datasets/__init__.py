"""Datasets: record schemas per task type, the JSONL parser, prompts and gold text."""

from evald_server.datasets._bio import bio_entities
from evald_server.datasets._numbers import last_number, reference_number
from evald_server.datasets._parser import DatasetRecord, ParsedDataset, parse_jsonl
from evald_server.datasets._prompts import (
    PLACEHOLDERS,
    prompt_text,
    render_prompt,
    template_sha256,
    validate_template,
)
from evald_server.datasets._references import expected_text, gold_entities, simulator_reference
from evald_server.datasets._regex import CompiledRegex, InvalidRegex, compile_regex

__all__ = [
    "PLACEHOLDERS",
    "CompiledRegex",
    "DatasetRecord",
    "InvalidRegex",
    "ParsedDataset",
    "bio_entities",
    "compile_regex",
    "expected_text",
    "gold_entities",
    "last_number",
    "parse_jsonl",
    "prompt_text",
    "reference_number",
    "render_prompt",
    "simulator_reference",
    "template_sha256",
    "validate_template",
]
