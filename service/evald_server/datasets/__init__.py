"""Datasets: record schemas per task type, the JSONL parser, prompts and gold text.

The parser and the record schemas (pydantic) are imported on first use of their names:
a scoring worker reads gold text and choices through this package but never parses an
upload, and pydantic with the schemas' validators is ~17 MB of every worker's memory.
"""

from typing import TYPE_CHECKING, Any

from evald_server.datasets._bio import bio_entities
from evald_server.datasets._chat import (
    MAX_SHOTS,
    ChatPrompt,
    PromptOptions,
    Shot,
    plain_prompt,
    pool_of,
    shot_positions,
    shots_needed,
)
from evald_server.datasets._choices import (
    MAX_CHOICES,
    choice_key,
    choice_letter,
    colliding_choices,
    gold_choice_index,
    letter_choices,
)
from evald_server.datasets._code_shapes import ProblemStyle, mbpp_entry_point
from evald_server.datasets._numbers import last_number, reference_number
from evald_server.datasets._prompts import (
    PLACEHOLDERS,
    prompt_text,
    render_prompt,
    template_sha256,
    validate_template,
)
from evald_server.datasets._references import (
    expected_text,
    gold_entities,
    simulator_reference,
)
from evald_server.datasets._regex import CompiledRegex, InvalidRegex, compile_regex
from evald_server.datasets._requests import NO_EXTRAS, RequestExtras, request_extras

if TYPE_CHECKING:
    from evald_server.datasets._code_records import (
        MAX_CODE_TESTS,
        MAX_ENTRY_POINT_CHARS,
        MAX_SOURCE_CHARS,
        MAX_TEST_CHARS,
        MAX_TEXT_CHARS,
        CodeRecord,
    )
    from evald_server.datasets._json_schemas import schema_problem, schema_validator
    from evald_server.datasets._parser import DatasetRecord, ParsedDataset, parse_jsonl

_PARSER_NAMES = frozenset({"DatasetRecord", "ParsedDataset", "parse_jsonl"})
# The code record's schema is pydantic too: loaded on first use, like the parser.
_CODE_RECORD_NAMES = frozenset(
    {
        "CodeRecord",
        "MAX_CODE_TESTS",
        "MAX_ENTRY_POINT_CHARS",
        "MAX_SOURCE_CHARS",
        "MAX_TEST_CHARS",
        "MAX_TEXT_CHARS",
    }
)
# jsonschema (and its referencing, attrs, rpds) only where a schema is checked or used.
_SCHEMA_NAMES = frozenset({"schema_problem", "schema_validator"})


def __getattr__(name: str) -> Any:
    if name in _PARSER_NAMES:
        from evald_server.datasets import _parser

        return getattr(_parser, name)
    if name in _CODE_RECORD_NAMES:
        from evald_server.datasets import _code_records

        return getattr(_code_records, name)
    if name in _SCHEMA_NAMES:
        from evald_server.datasets import _json_schemas

        return getattr(_json_schemas, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MAX_CHOICES",
    "MAX_CODE_TESTS",
    "MAX_ENTRY_POINT_CHARS",
    "MAX_SHOTS",
    "MAX_SOURCE_CHARS",
    "MAX_TEST_CHARS",
    "MAX_TEXT_CHARS",
    "NO_EXTRAS",
    "PLACEHOLDERS",
    "ChatPrompt",
    "CodeRecord",
    "CompiledRegex",
    "DatasetRecord",
    "InvalidRegex",
    "ParsedDataset",
    "ProblemStyle",
    "PromptOptions",
    "RequestExtras",
    "Shot",
    "bio_entities",
    "choice_key",
    "choice_letter",
    "colliding_choices",
    "compile_regex",
    "expected_text",
    "gold_choice_index",
    "gold_entities",
    "last_number",
    "letter_choices",
    "mbpp_entry_point",
    "parse_jsonl",
    "plain_prompt",
    "pool_of",
    "prompt_text",
    "reference_number",
    "render_prompt",
    "request_extras",
    "schema_problem",
    "schema_validator",
    "shot_positions",
    "shots_needed",
    "simulator_reference",
    "template_sha256",
    "validate_template",
]
