"""A code task's execution: every answer's program run in the sandbox, its verdict
stored beside the answer, before the task is scored.

Where the wait goes: never in the dispatcher's workers. A worker gives back its
model's, the server's and the run's slots when its call returns, as for any task, and
never waits for a sandbox slot, so the sandbox cannot starve inference; a slot of the
sandbox (``sandbox.slots``, the fourth named limit, with its in-use and waiting
statistics) is only ever held by a program that runs. Programs run in two places, one
task at a time each (a lock per task, so no answer is run twice):

* **while the task's inference goes on**: the engine calls ``answered(task_id)`` when
  a code task's answers commit; one runner per task (in this object's task group)
  sweeps the task's answers without a stored run, again as long as new ones commit;
* **in the task's scoring step** (``TaskScorer``), once its inference is over: a last
  sweep runs whatever is left (after a restart: everything not stored), then the task
  is scored.

Each page of answers without a stored run is extracted off the event loop (a worker
thread: the extraction rules parse Python), run at most ``slots`` at a time (the
sandbox's own async subprocess API; its slots are first come, first served across
tasks), and the page's runs are written in one transaction (``Store.store_executions``).
A crash or a drain loses at most the runs of a page not yet written: a resumed task
runs only the answers without a stored run, and inference is never asked again.

A stored run is data (``execution_json``): the verdict, its reason, the exception and
the last lines of its traceback, the limit hit, per-test outcomes, the extraction rule,
the duration and the start of stdout and stderr (``STORED_OUTPUT_CHARS`` each).
"""

import dataclasses
import functools
import json
import logging
from collections.abc import Sequence
from typing import Any

import anyio
import anyio.abc

from evald_server.code_tasks import (
    CodeProblem,
    ExtractedCode,
    code_problem,
    extract_code,
    test_job,
)
from evald_server.config import ConfigError, SandboxSection
from evald_server.domain import ErrorReason, EvalError
from evald_server.sandbox import (
    JobTooLarge,
    Sandbox,
    SandboxError,
    SandboxResult,
    SandboxSettings,
    TestJob,
    no_program_result,
)
from evald_server.scoring import (
    CodePayload,
    MetricUncertainty,
    PassAtK,
    ReducedMetric,
    ScoreReport,
)
from evald_server.store import ExecutionRow, Store, TaskOutput

_log = logging.getLogger(__name__)
STORED_OUTPUT_CHARS = 2000  # of a program's stdout and of its stderr kept per sample
_PAGE = 64  # answers read, run and written together


def sandbox_of(section: SandboxSection) -> Sandbox | None:
    """The server's sandbox (None: ``[sandbox]`` is off); a setting out of its bounds
    is a ``ConfigError`` naming the key."""
    if not section.enabled:
        return None
    try:
        settings = SandboxSettings(**section.model_dump())
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return Sandbox(settings)


def pass_at_k_name(k: int) -> str:
    """The headline metric of pass@k: ``pass_at_5``."""
    return f"pass_at_{k}"


def with_pass_at_k(report: ScoreReport, reduced: Sequence[ReducedMetric]) -> ScoreReport:
    """A code task's ``report`` with each pass@k (k > 1) of the run's reducers in its
    metrics, intervals and payload; any other report unchanged."""
    payload = report.payload
    pass_at = [m for m in reduced if m.name.startswith("pass@") and m.name != "pass@1"]
    if not isinstance(payload, CodePayload) or not pass_at:
        return report
    metrics = dict(report.metrics)
    uncertainty = dict(report.uncertainty)
    entries = list(payload.pass_at_k)
    for metric in pass_at:
        k = int(metric.name.removeprefix("pass@"))
        metrics[pass_at_k_name(k)] = metric.value
        uncertainty[pass_at_k_name(k)] = MetricUncertainty(bootstrap=metric.interval)
        entries.append(PassAtK(k, metric.value, metric.records, metric.skipped))
    return dataclasses.replace(
        report,
        metrics=metrics,
        uncertainty=uncertainty,
        payload=dataclasses.replace(payload, pass_at_k=tuple(sorted(entries, key=lambda e: e.k))),
    )


class ExecutionFailed(Exception):
    """The sandbox itself could not run a task's programs (not a program's failure)."""

    def __init__(self, error: EvalError) -> None:
        super().__init__(error.message)
        self.error = error


def execution_json(code: ExtractedCode | None, result: SandboxResult) -> dict[str, Any]:
    """What a sample keeps of its run (docs/SANDBOX.md, "Verdicts")."""
    output = result.output
    return {
        "verdict": result.verdict.value,
        "reason": result.reason,
        "error_type": result.error_type,
        "traceback": result.detail,
        "resource": result.resource.value,
        "tests": [
            {
                "index": t.index,
                "status": t.status.value,
                "error_type": t.error_type,
                "detail": t.detail,
            }
            for t in result.tests
        ],
        "extraction_rule": "" if code is None else code.rule.value,
        "duration_ms": round(result.duration_s * 1000.0, 3),
        "stdout": output.stdout[:STORED_OUTPUT_CHARS],
        "stderr": output.stderr[:STORED_OUTPUT_CHARS],
        "output_truncated": output.stdout_truncated
        or output.stderr_truncated
        or len(output.stdout) > STORED_OUTPUT_CHARS
        or len(output.stderr) > STORED_OUTPUT_CHARS,
    }


def _prepare(problem: CodeProblem, answer: str) -> tuple[ExtractedCode | None, TestJob | str]:
    """The code of ``answer`` and the job to run, or why there is nothing to run."""
    code = extract_code(answer, problem)
    if code is None:
        return None, "the answer holds no code"
    try:
        return code, test_job(problem, code)
    except JobTooLarge as exc:
        return code, f"the program is too large to run: {exc}"


class CodeRuns:
    """Runs code tasks' programs in ``sandbox`` (None: the sandbox is off here)."""

    def __init__(self, store: Store, sandbox: Sandbox | None) -> None:
        self._store = store
        self.sandbox = sandbox
        self.executed = 0  # programs run (or found to be none) by this process
        self._locks: dict[str, anyio.Lock] = {}  # one sweep of a task at a time
        self._wanted: set[str] = set()  # tasks with answers committed since their sweep
        self._runners: set[str] = set()  # tasks with a runner
        self._group: anyio.abc.TaskGroup | None = None

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """The runners' task group, until cancelled (a program in flight is killed)."""
        async with anyio.create_task_group() as group:
            self._group = group
            task_status.started()
            await anyio.sleep_forever()

    def answered(self, task_id: str) -> None:
        """Answers of code task ``task_id`` committed: run them while inference goes on."""
        if self.sandbox is None or self._group is None:
            return  # the scoring step says why, for the task
        self._wanted.add(task_id)
        if task_id not in self._runners:
            self._runners.add(task_id)
            self._group.start_soon(self._run_while_answered, task_id)

    def scored(self, task_id: str) -> None:
        """The task is scored: forget it."""
        self._wanted.discard(task_id)
        lock = self._locks.get(task_id)
        if lock is not None and not lock.locked() and task_id not in self._runners:
            del self._locks[task_id]

    async def _run_while_answered(self, task_id: str) -> None:
        try:
            while task_id in self._wanted:
                self._wanted.discard(task_id)
                await self.execute_task(task_id)
        except ExecutionFailed as failure:  # the scoring step reports it for the task
            _log.warning("code task %s: %s", task_id, failure.error.message)
        except Exception:  # a bug or a lost store: the scoring step sweeps again
            _log.exception("running code task %s's programs failed", task_id)
        finally:
            self._runners.discard(task_id)

    async def execute_task(self, task_id: str) -> None:
        """Run every succeeded answer of ``task_id`` that has no stored run; raises
        ``ExecutionFailed`` when the sandbox is off or fails (runs stored so far stay)."""
        async with self._locks.setdefault(task_id, anyio.Lock()):
            await self._sweep(task_id)

    async def _sweep(self, task_id: str) -> None:
        after = 0
        while page := await self._store.task_outputs(task_id, after, _PAGE, unexecuted=True):
            after = page[-1].row_id
            sandbox = await self._usable_sandbox()
            rows, failures = await self._run_page(sandbox, page)
            done = [row for row in rows if row is not None]
            if done:
                await self._store.store_executions(done)
                self.executed += len(done)
            if failures:
                raise ExecutionFailed(
                    EvalError.of(
                        ErrorReason.SCORER_FAILED,
                        f"the code sandbox failed while running this task's programs: "
                        f"{failures[0]}",
                    )
                )

    async def _run_page(
        self, sandbox: Sandbox, page: Sequence[TaskOutput]
    ) -> tuple[list[ExecutionRow | None], list[SandboxError]]:
        """Run a page's programs, at most ``slots`` of them waiting or running at once."""
        rows: list[ExecutionRow | None] = [None] * len(page)
        failures: list[SandboxError] = []
        limiter = anyio.CapacityLimiter(sandbox.settings.slots)

        async def run_one(index: int, output: TaskOutput) -> None:
            async with limiter:
                try:
                    rows[index] = await self._run(sandbox, output)
                except SandboxError as exc:
                    failures.append(exc)

        async with anyio.create_task_group() as tg:
            for index, output in enumerate(page):
                tg.start_soon(run_one, index, output)
        return rows, failures

    async def _usable_sandbox(self) -> Sandbox:
        if self.sandbox is None:
            raise ExecutionFailed(
                EvalError.of(
                    ErrorReason.SCORER_FAILED,
                    "the code sandbox is not enabled on this server ([sandbox] enabled = "
                    "false): this code task's programs cannot run",
                )
            )
        check = await self.sandbox.check()
        if not check.available:
            raise ExecutionFailed(EvalError.of(ErrorReason.SCORER_FAILED, check.message))
        return self.sandbox

    async def _run(self, sandbox: Sandbox, output: TaskOutput) -> ExecutionRow:
        problem = code_problem(json.loads(output.record_json))
        # The extraction rules parse Python (an answer may be 256 KiB): off the loop.
        code, job = await anyio.to_thread.run_sync(
            functools.partial(_prepare, problem, output.output)
        )
        if isinstance(job, str):
            result = no_program_result(job)
        else:
            result = await sandbox.run(job)
        return ExecutionRow(output.row_id, json.dumps(execution_json(code, result)))
