"""Builders shared by the scorer tests."""

from collections.abc import Mapping, Sequence
from typing import Any

from evald_server.scoring import ScoringSample


def make_sample(
    record: Mapping[str, Any],
    output: str | None,
    *,
    index: int,
    record_id: str | None = None,
    repeat: int = 0,
) -> ScoringSample:
    rid = record_id if record_id is not None else f"r{index}"
    return ScoringSample(
        subtask_id=f"s{index}-{repeat}",
        record_id=rid,
        repeat_index=repeat,
        record=record,
        output=output,
    )


def samples_of(pairs: Sequence[tuple[Mapping[str, Any], str | None]]) -> list[ScoringSample]:
    """One sample per (record, output), each its own record."""
    return [make_sample(record, output, index=i) for i, (record, output) in enumerate(pairs)]
