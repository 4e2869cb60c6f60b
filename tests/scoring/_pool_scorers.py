"""Scorers injected into a ScoringPool by the pool tests (importable by its workers)."""

import dataclasses
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evald_server.domain import TaskType
from evald_server.scoring import ScoreReport, ScoringSample, score_task
from evald_server.scoring._classification import ClassificationScorer
from evald_server.scoring._qa import QaScorer

_MAX_WAIT_S = 30.0  # every wait is bounded; the pool kills these workers far sooner


class SleepingScorer:
    """Writes its process id to the record's ``pid_file``, then sleeps past any budget."""

    name = "sleeping"
    version = "0.0.1"
    task_type = TaskType.SUMMARIZATION

    def score(
        self,
        samples: Sequence[ScoringSample],
        *,
        seed: int = 0,
        worst_k: int = 5,
        resamples: int = 1000,
    ) -> ScoreReport:
        Path(str(samples[0].record["pid_file"])).write_text(str(os.getpid()))
        time.sleep(_MAX_WAIT_S)
        raise AssertionError("the pool should have killed this worker")


class RaisingScorer:
    name = "raising"
    version = "0.0.1"
    task_type = TaskType.NER

    def score(
        self,
        samples: Sequence[ScoringSample],
        *,
        seed: int = 0,
        worst_k: int = 5,
        resamples: int = 1000,
    ) -> ScoreReport:
        raise ValueError("secret sample text")


class WaitingScorer:
    """Waits until the event loop's test writes ``go_file``: only possible if scoring
    does not block the loop. Reports its process id and whether the file came."""

    name = "waiting"
    version = "0.0.1"
    task_type = TaskType.GENERATION

    def score(
        self,
        samples: Sequence[ScoringSample],
        *,
        seed: int = 0,
        worst_k: int = 5,
        resamples: int = 1000,
    ) -> ScoreReport:
        go_file = Path(str(samples[0].record["go_file"]))
        deadline = time.monotonic() + _MAX_WAIT_S
        while not go_file.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        report = score_task(TaskType.GENERATION, samples, seed=seed, resamples=resamples)
        metrics = {"pid": float(os.getpid()), "saw_go_file": float(go_file.exists())}
        return dataclasses.replace(report, metrics=metrics)


class ClassificationBreakingOnBoom(ClassificationScorer):
    """Classification that raises on any sample whose output says BOOM (and on the
    whole task when every output does): one bad row, not a broken scorer."""

    def _match(
        self, scored: Sequence[ScoringSample], labels: tuple[str, ...]
    ) -> tuple[Any, Any, list[Any]]:
        for sample in scored:
            if "BOOM" in (sample.output or ""):
                raise ValueError(f"cannot read the answer of {sample.record_id}")
        return super()._match(scored, labels)


class QaBreakingOnBoom(QaScorer):
    """QA (a ``streams`` scorer: whole tasks are measured page by page) that raises on
    any sample whose output says BOOM."""

    def measure(
        self, scored: Sequence[ScoringSample], every: Sequence[ScoringSample], state: Any
    ) -> tuple[list[Any], dict[str, Any]]:
        for sample in scored:
            if "BOOM" in (sample.output or ""):
                raise ValueError(f"cannot read the answer of {sample.record_id}")
        return super().measure(scored, every, state)


class QaBreakingOnItsExample(QaScorer):
    """QA whose worst example of a record marked ``boom`` cannot be written: it raises
    after the page's samples were measured."""

    def expected_text(self, record: Mapping[str, Any]) -> str:
        if record.get("boom"):
            raise ValueError("cannot show this record")
        return super().expected_text(record)
