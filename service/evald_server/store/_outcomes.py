"""The group commit's plan: a batch of outcomes turned into what its transaction writes.

Both dialects record outcomes the same way: read which runs are cancelling and which
rows this owner still holds, ``plan_outcomes``, then write the plan (each row's update,
the runs' cost sums, the judge rows its answers call for, the counter moves, the tasks
whose inference ended, the failure events) and report it with ``OutcomePlan.report``.
Outcomes are applied only to rows still ``running`` under this owner: a row that a
cancel, a restart or another replica took back is never overwritten.
"""

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from evald_server.domain import (
    OUTCOME_TARGET,
    Cost,
    OutcomeKind,
    RetryClass,
    SubtaskPhase,
    SubtaskState,
    effective_outcome,
    spends_attempt,
)
from evald_server.store._plans import Answer, CounterDeltas
from evald_server.store._records import (
    CompletionReport,
    EventRow,
    RetryScheduled,
    SubtaskOutcome,
)
from evald_server.store._rows import dumps, error_json

_S = SubtaskState
_TERMINAL = frozenset(s for s in _S if s.is_terminal)


class OutcomeUpdate(NamedTuple):
    """One subtask row's update, in the order of the dialects' UPDATE parameters. Sums
    (attempt, requests, …) are added to the row, ``first_error`` kept if set, the
    others (outputs, usage, …) kept where they are None."""

    state: str
    updated_at: float
    attempt: int  # + 1 when the outcome spends an attempt
    requests: int  # + the calls made (``SubtaskOutcome.calls``) when the attempt made any
    rate_limited: int
    call_time_s: float
    next_attempt_at: float | None  # set (a retry) or cleared
    output: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_s: float | None
    ttft_s: float | None
    first_error: str | None
    last_error: str | None
    top_logprobs: str | None
    finish_reason: str | None
    failed_rate_limited: int
    failed_timeout: int
    failed_transient: int
    cost_picousd: int | None
    cost_tokens: int | None
    cost_estimated: bool  # or-ed with the stored one
    verdict: float | None
    cache_hit: bool
    answer_flags: str | None
    row_id: int


@dataclass
class OutcomePlan:
    updates: list[OutcomeUpdate] = field(default_factory=list)
    run_costs: dict[str, Cost] = field(default_factory=dict)  # what the successes cost
    deltas: CounterDeltas = field(default_factory=CounterDeltas)
    answers: list[Answer] = field(default_factory=list)  # succeeded answers: judged?
    failures: list[SubtaskOutcome] = field(default_factory=list)  # their events
    retries: list[RetryScheduled] = field(default_factory=list)
    completed: dict[str, int] = field(default_factory=dict)  # newly terminal, per run
    rework: set[str] = field(default_factory=set)  # runs with work pending or waiting again

    def cost_values(self) -> list[tuple[int, int, bool, str]]:
        """(picousd, tokens, estimated, run_id) to add to each run's cost, in run order."""
        return [
            (c.picousd, c.tokens, c.estimated, run_id)
            for run_id, c in sorted(self.run_costs.items())
        ]

    def report(
        self,
        finished: Sequence[str],
        events: Sequence[EventRow],
        judge_work: Sequence[tuple[str, str]],
    ) -> CompletionReport:
        return CompletionReport(
            applied=len(self.updates),
            finished_tasks=tuple(finished),
            retries=tuple(self.retries),
            completed_per_run=self.completed,
            events=tuple(events),
            judge_work=tuple(judge_work),
        )


def plan_outcomes(
    outcomes: Sequence[SubtaskOutcome],
    owned: Collection[int],
    cancelling: Collection[str],
    now: float,
) -> OutcomePlan:
    """The plan of a batch, given the row ids this owner still holds (``running`` under
    it) and the runs whose cancel was requested (their retries are cancelled instead,
    their answers get no judge rows)."""
    plan = OutcomePlan()
    moved: defaultdict[tuple[str, str, SubtaskState], int] = defaultdict(int)
    for outcome in outcomes:
        if outcome.row_id not in owned:
            continue  # taken back by a cancel, a restart or another replica
        kind = effective_outcome(outcome.kind, cancel_requested=outcome.run_id in cancelling)
        target = OUTCOME_TARGET[kind]
        cost = outcome.cost if kind is OutcomeKind.SUCCEEDED else None
        if cost is not None:
            plan.run_costs[outcome.run_id] = plan.run_costs.get(outcome.run_id, Cost()) + cost
        plan.updates.append(_update(outcome, kind, target, cost, now))
        if kind is OutcomeKind.SUCCEEDED and outcome.phase is SubtaskPhase.ANSWER:
            plan.answers.append(
                Answer(
                    outcome.row_id,
                    outcome.run_id,
                    outcome.task_id,
                    outcome.record_idx,
                    outcome.repeat_index,
                )
            )
        moved[outcome.run_id, outcome.task_id, target] += 1
        if target in _TERMINAL:
            plan.completed[outcome.run_id] = plan.completed.get(outcome.run_id, 0) + 1
        if kind is OutcomeKind.RETRY and outcome.next_attempt_at is not None:
            plan.retries.append(
                RetryScheduled(outcome.run_id, outcome.model_id, outcome.next_attempt_at)
            )
        if kind is OutcomeKind.FAILED_PERMANENT and outcome.error is not None:
            plan.failures.append(outcome)
    for (run_id, task_id, target), count in moved.items():
        plan.deltas.move(run_id, task_id, _S.RUNNING, target, count)
        if target in (_S.PENDING, _S.FAILED):  # released by a drain, or a retry waiting
            plan.rework.add(run_id)
    return plan


def _update(
    outcome: SubtaskOutcome,
    kind: OutcomeKind,
    target: SubtaskState,
    cost: Cost | None,
    now: float,
) -> OutcomeUpdate:
    spent = spends_attempt(kind, attempted=outcome.attempted)
    failed = outcome.retry_class if spent else None
    error = error_json(outcome.error)
    return OutcomeUpdate(
        state=target.value,
        updated_at=now,
        attempt=int(spent),
        requests=outcome.calls if outcome.attempted else 0,
        rate_limited=int(outcome.rate_limited),
        call_time_s=outcome.call_time_s,
        next_attempt_at=outcome.next_attempt_at if kind is OutcomeKind.RETRY else None,
        output=outcome.output,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        latency_s=outcome.latency_s,
        ttft_s=outcome.ttft_s,
        first_error=error,
        last_error=error,
        top_logprobs=None if outcome.top_logprobs is None else dumps(outcome.top_logprobs),
        finish_reason=outcome.finish_reason,
        failed_rate_limited=int(failed is RetryClass.RATE_LIMITED),
        failed_timeout=int(failed is RetryClass.TIMEOUT),
        failed_transient=int(failed is RetryClass.TRANSIENT),
        cost_picousd=None if cost is None or not cost.priced else cost.picousd,
        cost_tokens=None if cost is None else cost.tokens,
        cost_estimated=cost is not None and cost.estimated,
        verdict=outcome.verdict,
        cache_hit=outcome.cache_hit and kind is OutcomeKind.SUCCEEDED,
        answer_flags=dumps(list(outcome.answer_flags)) if outcome.answer_flags else None,
        row_id=outcome.row_id,
    )
