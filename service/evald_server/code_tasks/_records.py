"""A stored code record as the sandbox needs it: ``code_problem`` turns the fields that
``datasets.CodeRecord`` validated at upload into a ``CodeProblem`` (its style, the
prompt, the entry point, the tests), without pydantic."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from evald_server.datasets import ProblemStyle, mbpp_entry_point


@dataclass(frozen=True, slots=True)
class CodeProblem:
    """A code record as the sandbox needs it."""

    style: ProblemStyle
    prompt: str  # HumanEval: the code to complete; MBPP: the description
    entry_point: str  # the function the tests call
    tests: tuple[str, ...]  # HumanEval: the test program and its check call; MBPP: asserts
    setup: str = ""  # MBPP's test_setup_code, run before the program
    reference: str | None = None  # canonical_solution / code


def code_problem(fields: Mapping[str, Any]) -> CodeProblem:
    """The problem of a validated record's fields (as stored)."""
    if fields.get("prompt") is not None:
        entry = str(fields["entry_point"])
        test_program = f"{fields['test']}\n\ncheck({entry})\n"
        solution = fields.get("canonical_solution")
        return CodeProblem(
            style=ProblemStyle.HUMANEVAL,
            prompt=str(fields["prompt"]),
            entry_point=entry,
            tests=(test_program,),
            reference=None if solution is None else str(solution),
        )
    tests = tuple(str(t) for t in fields["test_list"])
    reference = fields.get("code")
    found = mbpp_entry_point(reference, list(tests))
    if found is None:  # CodeRecord refused it; stored fields are validated ones
        raise ValueError("test_list[0]: calls no function the program could define")
    return CodeProblem(
        style=ProblemStyle.MBPP,
        prompt=str(fields["text"]),
        entry_point=found,
        tests=tests,
        setup=str(fields.get("test_setup_code") or ""),
        reference=None if reference is None else str(reference),
    )
