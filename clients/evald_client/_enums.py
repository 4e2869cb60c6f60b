"""The enums of the evald.v1 contract, as Python ``StrEnum``s.

Each member mirrors the proto value of the same name without its prefix
(``TASK_TYPE_QA`` → ``TaskType.QA``); values are lower-case strings, the spelling the
CLI and JSON output use. A value the client does not know (a newer server) reads as
``UNSPECIFIED`` instead of failing.
"""

from enum import StrEnum


class TaskType(StrEnum):
    """What kind of evaluation a dataset holds; selects the record schema and scorer."""

    UNSPECIFIED = "unspecified"
    CLASSIFICATION = "classification"
    QA = "qa"
    NER = "ner"
    SUMMARIZATION = "summarization"
    GENERATION = "generation"
    MULTIPLE_CHOICE = "multiple_choice"
    CODE = "code"
    TOOL_CALL = "tool_call"
    STRUCTURED_OUTPUT = "structured_output"


class ShotFormat(StrEnum):
    """How k-shot examples are laid out: one user message, or user/assistant turns."""

    UNSPECIFIED = "unspecified"
    SINGLE_MESSAGE = "single_message"
    CHAT_TURNS = "chat_turns"


class ChoiceScoring(StrEnum):
    """How a multiple-choice answer is read: the text, the letter log-probabilities, or
    lm-eval's loglikelihood of each choice's continuation."""

    UNSPECIFIED = "unspecified"
    TEXT = "text"
    LOGPROBS = "logprobs"
    LOGLIKELIHOOD = "loglikelihood"  # lm-eval's method, over the completions endpoint


class ChoiceContinuation(StrEnum):
    """What follows the context in loglikelihood scoring: " A" or the choice's text."""

    UNSPECIFIED = "unspecified"
    LETTERS = "letters"
    TEXTS = "texts"


class PromptFormat(StrEnum):
    """How prompts reach a model: the server's chat template, or plain completions."""

    UNSPECIFIED = "unspecified"
    CHAT = "chat"
    PLAIN = "plain"


class ReducerKind(StrEnum):
    """A reducer over a record's repeats: pass@k, pass^k, majority vote, mean."""

    UNSPECIFIED = "unspecified"
    PASS_AT_K = "pass_at_k"
    PASS_HAT_K = "pass_hat_k"
    MAJORITY = "majority"
    MEAN = "mean"


class JudgeScoreFormat(StrEnum):
    """What a judge model answers with: a pass/fail verdict, or a score on a scale."""

    UNSPECIFIED = "unspecified"
    PASS_FAIL = "pass_fail"
    SCALE = "scale"


class RunState(StrEnum):
    """The lifecycle of a run."""

    UNSPECIFIED = "unspecified"
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """Whether the run will not change state again (until a RetryRun)."""
        return self in _TERMINAL_RUN_STATES


_TERMINAL_RUN_STATES = frozenset(
    {RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED, RunState.CANCELLED}
)


class TaskState(StrEnum):
    """The lifecycle of one task (model × dataset)."""

    UNSPECIFIED = "unspecified"
    PENDING = "pending"
    RUNNING = "running"
    SCORING = "scoring"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        """Whether the task has been scored or cancelled."""
        return self in _TERMINAL_TASK_STATES


_TERMINAL_TASK_STATES = frozenset(
    {TaskState.SUCCEEDED, TaskState.PARTIAL, TaskState.FAILED, TaskState.CANCELLED}
)


class SubtaskState(StrEnum):
    """The lifecycle of one sample (record × model × repeat index).

    ``FAILED`` means failed transiently and waiting for the engine's next attempt.
    """

    UNSPECIFIED = "unspecified"
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    FAILED_PERMANENT = "failed_permanent"
    CANCELLED = "cancelled"


class FinishReason(StrEnum):
    """Why the model stopped generating a successful answer; ``LENGTH``: max_tokens cut it.

    ``UNSPECIFIED`` before a success, and for answers stored before evald recorded it.
    """

    UNSPECIFIED = "unspecified"
    STOP = "stop"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"
    TOOL_CALLS = "tool_calls"
    UNKNOWN = "unknown"


class ResultStatus(StrEnum):
    """The status of a task's result."""

    UNSPECIFIED = "unspecified"
    SUCCESS = "success"
    PARTIAL_SUCCESS = "partial_success"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ErrorCategory(StrEnum):
    """Who has to act to fix a failure."""

    UNSPECIFIED = "unspecified"
    DATASET_INVALID = "dataset_invalid"
    MODEL_PROVIDER_ERROR = "model_provider_error"
    EVAL_OPERATOR_ERROR = "eval_operator_error"
    REQUEST_INVALID = "request_invalid"


class IntervalMethod(StrEnum):
    """How a metric's confidence interval was computed."""

    UNSPECIFIED = "unspecified"
    BOOTSTRAP_PERCENTILE = "bootstrap_percentile"
    WILSON = "wilson"
    NORMAL = "normal"
