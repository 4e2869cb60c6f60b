"""Scorers injected into a ScoringPool by the pool tests (importable by its workers)."""

import dataclasses
import os
import time
from collections.abc import Sequence
from pathlib import Path

from evald_server.domain import TaskType
from evald_server.scoring import ScoreReport, ScoringSample, score_task

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
