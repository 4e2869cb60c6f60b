"""The test program of a problem and the code read from an answer.

HumanEval: the program is the prompt completed by the code — the code appended to
the prompt when it continues the prompt's function, else the prompt (its imports and
helpers, its own function given a ``pass`` body) followed by the code, whose
definition replaces the prompt's — and one test: the record's ``test`` (which
defines ``check``) and ``check(entry_point)``. MBPP: the program is
``test_setup_code`` and the code; each ``test_list`` item is a test of its own, so
each assert has its own outcome.
"""

from evald_server.code_tasks._extraction import ExtractedCode
from evald_server.code_tasks._records import CodeProblem
from evald_server.datasets import ProblemStyle
from evald_server.sandbox import TestJob


def program_of(problem: CodeProblem, code: ExtractedCode) -> str:
    """The program the tests run against."""
    if problem.style is ProblemStyle.MBPP:
        return f"{problem.setup}\n{code.code}" if problem.setup.strip() else code.code
    if code.continues_prompt:
        return problem.prompt + code.code
    return f"{problem.prompt.rstrip()}\n    pass\n\n\n{code.code}"


def test_job(problem: CodeProblem, code: ExtractedCode) -> TestJob:
    """The sandbox job: the program, then the problem's tests."""
    return TestJob(program=program_of(problem, code), tests=problem.tests)
