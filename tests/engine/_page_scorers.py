"""A scorer injected into the engine's scoring pool by the page-scoring tests (importable
by the pool's workers)."""

from collections.abc import Sequence

from evald_server.scoring import ScoredPage, ScoreReport, ScoringSample
from evald_server.scoring._classification import ClassificationScorer


class FailingAtTheEnd(ClassificationScorer):
    """Scores pages as classification does, then fails the task's aggregation and its
    whole-task scoring: the task ends without a report after pages were stored."""

    def aggregate(
        self, pages: Sequence[ScoredPage], *, seed: int, worst_k: int, resamples: int
    ) -> ScoreReport | None:
        raise ValueError("the aggregation failed")

    def score(
        self,
        samples: Sequence[ScoringSample],
        *,
        seed: int = 0,
        worst_k: int = 5,
        resamples: int = 1000,
    ) -> ScoreReport:
        raise ValueError("the whole-task scoring failed")
