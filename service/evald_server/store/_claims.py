"""Claim assembly, planned once for both dialects: which runs may be claimed from, the
counter moves of a claim, the records and judged answers it needs, and the claimed
subtasks built from the rows it moved to ``running`` (``CLAIMED_COLUMNS``)."""

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from evald_server.domain import RetryCounts, RunState, SubtaskPhase, SubtaskState
from evald_server.store._plans import CounterDeltas
from evald_server.store._records import ClaimedSubtask, Json
from evald_server.store._rows import Row

_S = SubtaskState

_NO_FAILURES = RetryCounts()


def claimable(state: str, cancel_requested: Any) -> bool:
    """Whether a run read as (state, cancel_requested) may have work claimed."""
    return not cancel_requested and not RunState(state).is_terminal


def count_claim(
    deltas: CounterDeltas, run_id: str, retries: Iterable[Row], pending: Iterable[Row]
) -> None:
    """The counter moves of a claim's rows (``CLAIMED_COLUMNS``): due retries and
    pending work to running."""
    deltas.move_each(run_id, (r[1] for r in retries), _S.FAILED, _S.RUNNING)
    deltas.move_each(run_id, (r[1] for r in pending), _S.PENDING, _S.RUNNING)


def wanted_records(picked: Iterable[Row]) -> dict[str, set[int]]:
    """Task id → the record indexes the claimed rows need."""
    wanted: defaultdict[str, set[int]] = defaultdict(set)
    for row in picked:
        wanted[row[1]].add(row[2])
    return dict(wanted)


def judged_row_ids(picked: Iterable[Row]) -> list[int]:
    """The answers the claimed judge subtasks grade, in row order."""
    return sorted({row[7] for row in picked if row[7] is not None})


def claimed_subtasks(
    run_id: str,
    model_id: str,
    picked: Iterable[Row],
    records: Mapping[tuple[str, int], tuple[str, str, Json]],
    answers: Mapping[int, str],
) -> tuple[ClaimedSubtask, ...]:
    """The claim's subtasks from its rows (``CLAIMED_COLUMNS``, in row order), their
    records ((task, idx) → (dataset id, record id, fields)) and the answers its judge
    subtasks grade (row id → output)."""
    claimed = []
    for row_id, task_id, idx, repeat, attempt, phase, judge_round, judged, *failed in picked:
        dataset_id, record_id, fields = records[task_id, idx]
        claimed.append(
            ClaimedSubtask(
                row_id,
                run_id,
                task_id,
                model_id,
                idx,
                repeat,
                attempt,
                record_id,
                fields,
                dataset_id,
                RetryCounts(*failed) if any(failed) else _NO_FAILURES,
                phase=SubtaskPhase(phase),
                judge_round=judge_round,
                answer=None if judged is None else answers.get(judged, ""),
            )
        )
    return tuple(claimed)
