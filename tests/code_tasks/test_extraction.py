"""The program in real model answers: chat models with fences and prose, completion
models that run on, reasoning models, answers with no code."""

import pytest

from evald_server.code_tasks import (
    CodeProblem,
    ExtractionRule,
    ProblemStyle,
    extract_code,
    program_of,
)

PROMPT = (
    "from typing import List\n\n\n"
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    '    """ Check if in given list of numbers, are any two numbers closer to each other than\n'
    "    given threshold.\n"
    '    """\n'
)
HUMANEVAL = CodeProblem(
    style=ProblemStyle.HUMANEVAL,
    prompt=PROMPT,
    entry_point="has_close_elements",
    tests=("def check(candidate):\n    assert candidate([1.0, 2.8], 0.3) is False\n",),
)
MBPP = CodeProblem(
    style=ProblemStyle.MBPP,
    prompt="Write a python function to remove first and last occurrence of a given character.",
    entry_point="remove_Occ",
    tests=('assert remove_Occ("hello","l") == "heo"',),
)
SOLUTION = (
    "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
    "    for i, a in enumerate(numbers):\n"
    "        for b in numbers[i + 1:]:\n"
    "            if abs(a - b) < threshold:\n"
    "                return True\n"
    "    return False\n"
)
BODY = (
    "    for i, a in enumerate(numbers):\n"
    "        for b in numbers[i + 1:]:\n"
    "            if abs(a - b) < threshold:\n"
    "                return True\n"
    "    return False\n"
)

CHAT_WITH_PROSE = f"""Here is an implementation:

```python
from typing import List

{SOLUTION}```

This works by comparing every pair of numbers; it runs in O(n^2) time.
"""

SEVERAL_FENCES = f"""First, a helper-free version:

```python
{SOLUTION}```

Example usage:

```python
print(has_close_elements([1.0, 2.0, 3.0], 0.5))  # False
```

And the shell command to run it:

```bash
python solution.py
```
"""

CORRECTED = f"""```python
def has_close_elements(numbers, threshold):
    return True  # first attempt
```

Wait, that is wrong. Corrected version:

```Python
{SOLUTION}```"""

MAIN_BLOCK = f"""```py
{SOLUTION}

if __name__ == "__main__":
    import doctest
    doctest.testmod()
    n = int(input())
```"""

PROSE_NO_FENCE = f"""Sure! Here's the function.

{SOLUTION}
This solution checks all pairs."""

COMPLETION_RUNS_ON = (
    BODY + "\n\ndef check(candidate):\n    assert candidate([], 1.0) is False\n\n"
    "if __name__ == '__main__':\n    check(has_close_elements)\n"
)

UNCLOSED = f"Let me write it.\n```python\n{SOLUTION}    # the model ran out of tokens here"

THINKING = f"""<think>
Maybe ```python
def has_close_elements(numbers, threshold):
    return None
``` no, that's wrong.
</think>
```python
{SOLUTION}```"""

TILDE = f"~~~python\n{SOLUTION}~~~\n"


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        (CHAT_WITH_PROSE, ExtractionRule.FENCE),
        (SEVERAL_FENCES, ExtractionRule.FENCE),
        (CORRECTED, ExtractionRule.FENCE),
        (MAIN_BLOCK, ExtractionRule.FENCE),
        (PROSE_NO_FENCE, ExtractionRule.DEFINITION),
        (UNCLOSED, ExtractionRule.FENCE),
        (THINKING, ExtractionRule.FENCE),
        (TILDE, ExtractionRule.FENCE),
        (CHAT_WITH_PROSE.replace("\n", "\r\n"), ExtractionRule.FENCE),
    ],
    ids=[
        "prose-around-a-fence",
        "solution-then-usage-then-bash",
        "corrected-version-last",
        "main-block",
        "prose-no-fence",
        "unclosed-fence",
        "think-section",
        "tilde-fence",
        "crlf",
    ],
)
def test_chat_answers_give_the_solution(answer: str, rule: ExtractionRule) -> None:
    code = extract_code(answer, HUMANEVAL)
    assert code is not None
    assert code.rule is rule
    assert "for b in numbers[i + 1:]:" in code.code
    assert "return True  # first attempt" not in code.code
    assert "return None" not in code.code
    assert "print(" not in code.code
    assert "python solution.py" not in code.code
    assert "This solution" not in code.code
    assert "This works" not in code.code
    compile(program_of(HUMANEVAL, code), "<program>", "exec")


def test_a_completion_is_cut_where_the_model_runs_on_and_appended_to_the_prompt() -> None:
    code = extract_code(COMPLETION_RUNS_ON, HUMANEVAL)
    assert code is not None
    assert code.rule is ExtractionRule.COMPLETION
    assert code.code == BODY + "\n\n"
    assert program_of(HUMANEVAL, code) == PROMPT + BODY + "\n\n"


def test_a_repeated_signature_replaces_the_prompts_own_function() -> None:
    code = extract_code(CHAT_WITH_PROSE, HUMANEVAL)
    assert code is not None
    program = program_of(HUMANEVAL, code)
    assert program.startswith(PROMPT.rstrip() + "\n    pass\n")
    namespace: dict[str, object] = {}
    exec(compile(program, "<program>", "exec"), namespace)
    close = namespace["has_close_elements"]
    assert close([1.0, 1.1], 0.5) is True  # type: ignore[operator]


@pytest.mark.parametrize(
    "answer",
    ["", "   \n\n", "I cannot help with that.", "```python\n\n```", "```bash\nls\n```"],
)
def test_an_answer_without_code_has_no_program(answer: str) -> None:
    if answer == "I cannot help with that.":
        # a completion-style problem reads plain text as a (broken) continuation
        assert extract_code(answer, MBPP) is not None
        return
    assert extract_code(answer, HUMANEVAL) is None


def test_mbpp_answers() -> None:
    fenced = 'Here:\n```python\ndef remove_Occ(s, ch):\n    return s.replace(ch, "", 1)\n```\n'
    code = extract_code(fenced, MBPP)
    assert code is not None
    assert code.rule is ExtractionRule.FENCE
    bare = "def remove_Occ(s, ch):\n    return s\n"
    code = extract_code(bare, MBPP)
    assert code is not None
    assert code.rule is ExtractionRule.DEFINITION
    setup = CodeProblem(
        style=ProblemStyle.MBPP,
        prompt="p",
        entry_point="remove_Occ",
        tests=("assert True",),
        setup="import math",
    )
    assert program_of(setup, code) == "import math\n" + code.code
    whole = extract_code("x = 1\n", MBPP)
    assert whole is not None
    assert whole.rule is ExtractionRule.WHOLE


def test_the_fence_defining_the_entry_point_wins_over_a_longer_one() -> None:
    answer = (
        "```python\n" + "# notes\n" * 40 + "x = 1\n```\n"
        "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```\n"
    )
    code = extract_code(answer, HUMANEVAL)
    assert code is not None
    assert code.code.startswith("def has_close_elements")
    neither = "```python\nshort = 1\n```\n```\nlonger = 2\nlonger += 1\n```\n"
    code = extract_code(neither, HUMANEVAL)
    assert code is not None
    assert code.code == "longer = 2\nlonger += 1\n"
