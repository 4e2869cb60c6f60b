"""One code sample, start to end: read the program from the answer, run it against
its problem's tests in the sandbox, and give the verdict."""

from evald_server.code_tasks._assembly import test_job
from evald_server.code_tasks._extraction import ExtractedCode, extract_code
from evald_server.code_tasks._records import CodeProblem
from evald_server.sandbox import JobTooLarge, Sandbox, SandboxResult, no_program_result


async def evaluate_answer(
    sandbox: Sandbox, problem: CodeProblem, answer: str
) -> tuple[ExtractedCode | None, SandboxResult]:
    """The code read from ``answer`` (None: no program) and its verdict.

    ``SandboxError`` (the sandbox itself failed) propagates: it is not the sample's
    verdict."""
    code = extract_code(answer, problem)
    if code is None:
        return None, no_program_result("the answer holds no code")
    try:
        job = test_job(problem, code)
    except JobTooLarge as exc:
        return code, no_program_result(f"the program is too large to run: {exc}")
    return code, await sandbox.run(job)
