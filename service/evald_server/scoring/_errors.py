"""The one failure the scoring layer raises.

Scoring a task either returns a ``ScoreReport`` or raises ``ScoringFailure`` with
reason ``SCORER_FAILED`` (the scorer raised, or its worker died) or ``SCORER_TIMEOUT``
(over its time budget). The engine stores ``failure.error`` on that task only; the
message names the scorer and never carries a traceback (that goes to the log).
"""

from evald_server.domain import ErrorReason, EvalError


class ScoringFailure(Exception):
    """Scoring one task failed; ``error`` is what the task's result records."""

    def __init__(self, reason: ErrorReason, message: str, *, scorer: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.scorer = scorer

    @property
    def error(self) -> EvalError:
        return EvalError.of(self.reason, self.message, scorer=self.scorer)
