"""Code records: HumanEval's shape and MBPP's, validated once at upload.

HumanEval (``prompt``, ``test``, ``entry_point``, optional ``canonical_solution``):
the prompt is Python — imports, helpers and the signature with its docstring — that
the model completes; ``test`` defines ``check(candidate)``, called with the entry point.

MBPP (``text``, ``test_list``, optional ``test_setup_code``, ``code``,
``challenge_test_list``): the text describes the function in words; each item of
``test_list`` is a test of its own (an ``assert`` line), run after the setup code and
the program. ``challenge_test_list`` is kept but not run (MBPP's own evaluation runs
``test_list``). The function the tests call is the first one the reference ``code``
defines or, without it, the first one the first test calls (``mbpp_entry_point``).

Both may carry ``id``, ``metadata`` and ``task_id`` (HumanEval's ``"HumanEval/0"``,
MBPP's ``11``), so the published files upload unchanged. ``CodeRecord`` is the upload's
pydantic model (unknown fields and a mix of the two shapes are refused, naming the
field); ``code_tasks.code_problem`` turns stored fields into what the sandbox runs.
The bounds on tests are within the sandbox's own (``MAX_TESTS``, ``MAX_TEST_BYTES``;
``tests/code_tasks`` checks it): this layer cannot import the sandbox.
"""

import keyword
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

from evald_server.datasets._code_shapes import mbpp_entry_point

MAX_SOURCE_CHARS = 256 * 1024  # a prompt, a test program, a reference solution
MAX_TEXT_CHARS = 64 * 1024  # MBPP's description
MAX_ENTRY_POINT_CHARS = 200
MAX_CODE_TESTS = 1000  # tests of one MBPP record (the sandbox's MAX_TESTS)
MAX_TEST_CHARS = 256 * 1024  # one test's source (a quarter of the sandbox's MAX_TEST_BYTES)
_HUMANEVAL = ("prompt", "test", "entry_point", "canonical_solution")
_MBPP = ("text", "test_list", "test_setup_code", "code", "challenge_test_list")


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be blank (whitespace only)")
    return text


Source = Annotated[StrictStr, Field(min_length=1, max_length=MAX_SOURCE_CHARS)]
TestSource = Annotated[StrictStr, Field(min_length=1, max_length=MAX_TEST_CHARS)]


class CodeRecord(BaseModel):
    """One record of a code dataset (the upload's schema)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: StrictStr | StrictInt | None = None
    metadata: dict[str, Any] | None = None
    task_id: StrictStr | StrictInt | None = None
    prompt: Source | None = None
    test: Source | None = None
    entry_point: Annotated[StrictStr, Field(max_length=MAX_ENTRY_POINT_CHARS)] | None = None
    canonical_solution: Annotated[StrictStr, Field(max_length=MAX_SOURCE_CHARS)] | None = None
    text: Annotated[StrictStr, Field(min_length=1, max_length=MAX_TEXT_CHARS)] | None = None
    test_list: (
        Annotated[list[TestSource], Field(min_length=1, max_length=MAX_CODE_TESTS)] | None
    ) = None
    test_setup_code: Annotated[StrictStr, Field(max_length=MAX_SOURCE_CHARS)] | None = None
    code: Annotated[StrictStr, Field(max_length=MAX_SOURCE_CHARS)] | None = None
    challenge_test_list: Annotated[list[TestSource], Field(max_length=MAX_CODE_TESTS)] | None = None

    @model_validator(mode="after")
    def _one_shape(self) -> "CodeRecord":
        humaneval = [name for name in _HUMANEVAL if getattr(self, name) is not None]
        mbpp = [name for name in _MBPP if getattr(self, name) is not None]
        if humaneval and mbpp:
            raise ValueError(
                f"{mbpp[0]}: a record is HumanEval-shaped ({', '.join(humaneval)}) or "
                f"MBPP-shaped ({', '.join(mbpp)}), not both"
            )
        if mbpp:
            for name in ("text", "test_list"):
                if getattr(self, name) is None:
                    raise ValueError(f"{name}: Field required (an MBPP-shaped record)")
            for index, test in enumerate(self.test_list or ()):
                _not_blank_at(f"test_list[{index}]", test)
            if mbpp_entry_point(self.code, self.test_list or []) is None:
                raise ValueError("test_list[0]: calls no function the program could define")
            return self
        for name in ("prompt", "test", "entry_point"):
            if getattr(self, name) is None:
                raise ValueError(f"{name}: Field required (with prompt, test and entry_point)")
        entry = self.entry_point or ""
        if not entry.isidentifier() or keyword.iskeyword(entry):
            raise ValueError(f"entry_point: {entry!r} is not a Python identifier")
        _not_blank_at("prompt", self.prompt or "")
        if not re.search(r"\bdef\s+check\s*\(", self.test or ""):
            raise ValueError("test: defines no check(candidate) function")
        return self


def _not_blank_at(field: str, text: str) -> None:
    try:
        _not_blank(text)
    except ValueError as exc:
        raise ValueError(f"{field}: {exc}") from None
