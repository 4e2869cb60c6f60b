"""Code tasks: HumanEval- and MBPP-shaped records, the program read from a model's
answer, and its test run in the sandbox.

``CodeRecord`` validates an uploaded record; ``code_problem`` reads a stored one;
``extract_code`` finds the program in an answer (the rules are in ``_extraction``);
``test_job`` assembles what the sandbox runs; ``evaluate_answer`` does all three and
returns the verdict.
"""

from evald_server.code_tasks._assembly import program_of, test_job
from evald_server.code_tasks._evaluate import evaluate_answer
from evald_server.code_tasks._extraction import (
    MAX_ANSWER_CHARS,
    PYTHON_TAGS,
    ExtractedCode,
    ExtractionRule,
    extract_code,
)
from evald_server.code_tasks._records import CodeProblem, code_problem
from evald_server.datasets import (  # the upload's schema lives with the other records'
    MAX_ENTRY_POINT_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TEXT_CHARS,
    CodeRecord,
    ProblemStyle,
)

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_ENTRY_POINT_CHARS",
    "MAX_SOURCE_CHARS",
    "MAX_TEXT_CHARS",
    "PYTHON_TAGS",
    "CodeProblem",
    "CodeRecord",
    "ExtractedCode",
    "ExtractionRule",
    "ProblemStyle",
    "code_problem",
    "evaluate_answer",
    "extract_code",
    "program_of",
    "test_job",
]
