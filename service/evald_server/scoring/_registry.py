"""The scorer registry: one versioned scorer per task type, and ``score_task``."""

from collections.abc import Sequence
from typing import Protocol

from evald_server.domain import TaskType
from evald_server.scoring._classification import ClassificationScorer
from evald_server.scoring._code import CodeScorer
from evald_server.scoring._generation import GenerationScorer
from evald_server.scoring._multiple_choice import MultipleChoiceScorer
from evald_server.scoring._ner import NerScorer
from evald_server.scoring._qa import QaScorer
from evald_server.scoring._structured import StructuredOutputScorer
from evald_server.scoring._summarization import SummarizationScorer
from evald_server.scoring._tool_calls import ToolCallScorer
from evald_server.scoring._types import ScoreReport, ScoringSample


class Scorer(Protocol):
    """Scores every sample of one task; pure, synchronous, picklable."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def task_type(self) -> TaskType: ...

    def score(
        self,
        samples: Sequence[ScoringSample],
        *,
        seed: int = 0,
        worst_k: int = 5,
        resamples: int = 1000,
    ) -> ScoreReport: ...


_SCORERS: dict[TaskType, Scorer] = {
    scorer.task_type: scorer
    for scorer in (
        ClassificationScorer(),
        QaScorer(),
        NerScorer(),
        SummarizationScorer(),
        GenerationScorer(),
        MultipleChoiceScorer(),
        CodeScorer(),
        ToolCallScorer(),
        StructuredOutputScorer(),
    )
}


def scorer_for(task_type: TaskType) -> Scorer:
    """The registered scorer of ``task_type`` (every TaskType has one)."""
    return _SCORERS[TaskType(task_type)]


def score_task(
    task_type: TaskType,
    samples: Sequence[ScoringSample],
    *,
    seed: int = 0,
    worst_k: int = 5,
    resamples: int = 1000,
) -> ScoreReport:
    """Score one task's samples (those with ``output is None`` are counted as skipped)."""
    return scorer_for(task_type).score(samples, seed=seed, worst_k=worst_k, resamples=resamples)


def scorer_dependencies(task_type: TaskType) -> dict[str, str]:
    """``{distribution: version}`` of the libraries behind the scorer of ``task_type``."""
    # Here, not at the top: only the server asks, and a scoring worker would pay ~2.6 MB
    # for importlib.metadata (email, zipfile, csv) it never uses.
    from importlib import metadata

    libraries: Sequence[str] = getattr(scorer_for(task_type), "libraries", ())
    versions = {}
    for name in libraries:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
