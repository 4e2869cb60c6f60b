"""Enumerations shared by the engine, the store, the scorers and the API.

Values are lower-case strings because they are stored in the database and logged;
the API layer maps them by name to the ``evald.v1`` proto enums.
"""

from enum import StrEnum


class TaskType(StrEnum):
    """What kind of evaluation a dataset holds; selects the record schema and scorer."""

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
    """How k-shot examples are laid out in the chat messages."""

    SINGLE_MESSAGE = "single_message"  # examples and the record in one user message
    CHAT_TURNS = "chat_turns"  # a user + assistant turn per example, then the record


class ChoiceScoring(StrEnum):
    """How a multiple-choice answer is read from the model."""

    TEXT = "text"  # the generated text, by the extraction rules
    LOGPROBS = "logprobs"  # the letter tokens' log-probabilities (text as the fallback)
    # Per choice, the continuation's summed log-probability over /v1/completions (lm-eval).
    LOGLIKELIHOOD = "loglikelihood"


class ChoiceContinuation(StrEnum):
    """What follows the context in loglikelihood scoring: " A" or " Paris"."""

    LETTERS = "letters"
    TEXTS = "texts"


class PromptFormat(StrEnum):
    """How a prompt reaches the model: the server's chat template, or plain text."""

    CHAT = "chat"  # /v1/chat/completions (lm-eval --apply_chat_template)
    PLAIN = "plain"  # /v1/completions, the messages' text joined (lm-eval local-completions)


class JudgeScoreFormat(StrEnum):
    """What a judge model is asked to answer with (and what is parsed, strictly)."""

    PASS_FAIL = "pass_fail"  # a last line "VERDICT: PASS" or "VERDICT: FAIL"
    SCALE = "scale"  # a last line "SCORE: <integer in [scale_min, scale_max]>"


class SubtaskState(StrEnum):
    """One record × model × repeat index: the unit that is executed and retried.

    ``FAILED`` means "failed, waiting for its retry at ``next_attempt_at``"; the
    dispatcher treats it like ``PENDING`` once that time has come.
    """

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    FAILED_PERMANENT = "failed_permanent"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_SUBTASK_STATES


_TERMINAL_SUBTASK_STATES = frozenset(
    {SubtaskState.SUCCEEDED, SubtaskState.FAILED_PERMANENT, SubtaskState.CANCELLED}
)


class TaskState(StrEnum):
    """One model × dataset inside a run: the unit that is scored."""

    PENDING = "pending"
    RUNNING = "running"
    SCORING = "scoring"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_TASK_STATES


_TERMINAL_TASK_STATES = frozenset(
    {TaskState.SUCCEEDED, TaskState.PARTIAL, TaskState.FAILED, TaskState.CANCELLED}
)


class RunState(StrEnum):
    """A submitted batch of models × datasets: the unit of progress, cancel and retry."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL_RUN_STATES


_TERMINAL_RUN_STATES = frozenset(
    {RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED, RunState.CANCELLED}
)


class ResultStatus(StrEnum):
    """The status of one TaskEvaluationResult."""

    SUCCESS = "success"
    PARTIAL_SUCCESS = "partial_success"
    FAILED = "failed"
    CANCELLED = "cancelled"


class FinishReason(StrEnum):
    """Why the model stopped generating a successful answer (OpenAI's finish_reason)."""

    STOP = "stop"
    LENGTH = "length"  # max_tokens (or the context) cut the answer
    CONTENT_FILTER = "content_filter"
    TOOL_CALLS = "tool_calls"
    UNKNOWN = "unknown"  # absent (non-streamed) or a value outside the four above

    @classmethod
    def parse(cls, value: object) -> "FinishReason":
        """The member for a provider's value; the legacy "function_call" is a tool call."""
        if value == "function_call":
            return cls.TOOL_CALLS
        try:
            return cls(value) if isinstance(value, str) else cls.UNKNOWN
        except ValueError:
            return cls.UNKNOWN


class ErrorCategory(StrEnum):
    """The graded error taxonomy: who has to act to fix the problem."""

    DATASET_INVALID = "dataset_invalid"  # the uploader: fix the data
    MODEL_PROVIDER_ERROR = "model_provider_error"  # the provider (or wait and retry)
    EVAL_OPERATOR_ERROR = "eval_operator_error"  # evald's operators: a bug or a broken scorer
    REQUEST_INVALID = "request_invalid"  # the caller: fix the request (spec, ids, limits, auth)


class ErrorReason(StrEnum):
    """Machine-readable reasons, in the style of google/api/error_reason.proto.

    The API layer sends ``name`` (UPPER_SNAKE) as ``google.rpc.ErrorInfo.reason``.
    """

    # DATASET_INVALID
    DATASET_PARSE_ERROR = "dataset_parse_error"
    DATASET_FIELD_MISSING = "dataset_field_missing"
    DATASET_FIELD_INVALID = "dataset_field_invalid"
    DATASET_DUPLICATE_ID = "dataset_duplicate_id"
    DATASET_EMPTY = "dataset_empty"
    DATASET_TOO_LARGE = "dataset_too_large"
    DATASET_ENCODING_ERROR = "dataset_encoding_error"
    DATASET_HEADER_INVALID = "dataset_header_invalid"
    DATASET_NOT_FOUND = "dataset_not_found"
    DATASET_VERSION_NOT_FOUND = "dataset_version_not_found"
    DATASET_VERSION_CONFLICT = "dataset_version_conflict"
    DATASET_UPLOAD_INCOMPLETE = "dataset_upload_incomplete"
    # MODEL_PROVIDER_ERROR
    PROVIDER_RATE_LIMITED = "provider_rate_limited"
    PROVIDER_TIMEOUT = "provider_timeout"
    PROVIDER_HTTP_5XX = "provider_http_5xx"
    PROVIDER_CONNECTION_ERROR = "provider_connection_error"
    PROVIDER_BAD_RESPONSE = "provider_bad_response"
    PROVIDER_REJECTED = "provider_rejected"
    PROVIDER_AUTH_FAILED = "provider_auth_failed"
    JUDGE_VERDICT_UNPARSEABLE = "judge_verdict_unparseable"
    # EVAL_OPERATOR_ERROR
    SCORER_FAILED = "scorer_failed"
    SCORER_TIMEOUT = "scorer_timeout"
    INTERNAL_ERROR = "internal_error"
    # REQUEST_INVALID
    INVALID_ARGUMENT = "invalid_argument"
    RUN_SPEC_INVALID = "run_spec_invalid"
    MODEL_NOT_FOUND = "model_not_found"
    RUN_NOT_FOUND = "run_not_found"
    REQUEST_ID_CONFLICT = "request_id_conflict"
    LIMIT_EXCEEDED = "limit_exceeded"
    RUN_NOT_RETRYABLE = "run_not_retryable"
    WATCH_SEQ_EXPIRED = "watch_seq_expired"
    PAGE_TOKEN_INVALID = "page_token_invalid"
    UNAUTHENTICATED = "unauthenticated"
    SERVER_DRAINING = "server_draining"
    STORE_UNAVAILABLE = "store_unavailable"
    RUN_NOT_FINISHED = "run_not_finished"
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"
