from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class TaskType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_TYPE_UNSPECIFIED: _ClassVar[TaskType]
    TASK_TYPE_CLASSIFICATION: _ClassVar[TaskType]
    TASK_TYPE_QA: _ClassVar[TaskType]
    TASK_TYPE_NER: _ClassVar[TaskType]
    TASK_TYPE_SUMMARIZATION: _ClassVar[TaskType]
    TASK_TYPE_GENERATION: _ClassVar[TaskType]
    TASK_TYPE_MULTIPLE_CHOICE: _ClassVar[TaskType]
    TASK_TYPE_CODE: _ClassVar[TaskType]
    TASK_TYPE_TOOL_CALL: _ClassVar[TaskType]
    TASK_TYPE_STRUCTURED_OUTPUT: _ClassVar[TaskType]

class ShotFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SHOT_FORMAT_UNSPECIFIED: _ClassVar[ShotFormat]
    SHOT_FORMAT_SINGLE_MESSAGE: _ClassVar[ShotFormat]
    SHOT_FORMAT_CHAT_TURNS: _ClassVar[ShotFormat]

class JudgeScoreFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JUDGE_SCORE_FORMAT_UNSPECIFIED: _ClassVar[JudgeScoreFormat]
    JUDGE_SCORE_FORMAT_PASS_FAIL: _ClassVar[JudgeScoreFormat]
    JUDGE_SCORE_FORMAT_SCALE: _ClassVar[JudgeScoreFormat]

class ChoiceScoring(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHOICE_SCORING_UNSPECIFIED: _ClassVar[ChoiceScoring]
    CHOICE_SCORING_TEXT: _ClassVar[ChoiceScoring]
    CHOICE_SCORING_LOGPROBS: _ClassVar[ChoiceScoring]
    CHOICE_SCORING_LOGLIKELIHOOD: _ClassVar[ChoiceScoring]

class ChoiceContinuation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHOICE_CONTINUATION_UNSPECIFIED: _ClassVar[ChoiceContinuation]
    CHOICE_CONTINUATION_LETTERS: _ClassVar[ChoiceContinuation]
    CHOICE_CONTINUATION_TEXTS: _ClassVar[ChoiceContinuation]

class PromptFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROMPT_FORMAT_UNSPECIFIED: _ClassVar[PromptFormat]
    PROMPT_FORMAT_CHAT: _ClassVar[PromptFormat]
    PROMPT_FORMAT_PLAIN: _ClassVar[PromptFormat]

class SubtaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUBTASK_STATE_UNSPECIFIED: _ClassVar[SubtaskState]
    SUBTASK_STATE_PENDING: _ClassVar[SubtaskState]
    SUBTASK_STATE_RUNNING: _ClassVar[SubtaskState]
    SUBTASK_STATE_SUCCEEDED: _ClassVar[SubtaskState]
    SUBTASK_STATE_FAILED: _ClassVar[SubtaskState]
    SUBTASK_STATE_FAILED_PERMANENT: _ClassVar[SubtaskState]
    SUBTASK_STATE_CANCELLED: _ClassVar[SubtaskState]

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATE_UNSPECIFIED: _ClassVar[TaskState]
    TASK_STATE_PENDING: _ClassVar[TaskState]
    TASK_STATE_RUNNING: _ClassVar[TaskState]
    TASK_STATE_SCORING: _ClassVar[TaskState]
    TASK_STATE_SUCCEEDED: _ClassVar[TaskState]
    TASK_STATE_PARTIAL: _ClassVar[TaskState]
    TASK_STATE_FAILED: _ClassVar[TaskState]
    TASK_STATE_CANCELLED: _ClassVar[TaskState]

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    RUN_STATE_PENDING: _ClassVar[RunState]
    RUN_STATE_RUNNING: _ClassVar[RunState]
    RUN_STATE_SUCCEEDED: _ClassVar[RunState]
    RUN_STATE_PARTIAL: _ClassVar[RunState]
    RUN_STATE_FAILED: _ClassVar[RunState]
    RUN_STATE_CANCELLED: _ClassVar[RunState]

class ResultStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESULT_STATUS_UNSPECIFIED: _ClassVar[ResultStatus]
    RESULT_STATUS_SUCCESS: _ClassVar[ResultStatus]
    RESULT_STATUS_PARTIAL_SUCCESS: _ClassVar[ResultStatus]
    RESULT_STATUS_FAILED: _ClassVar[ResultStatus]
    RESULT_STATUS_CANCELLED: _ClassVar[ResultStatus]

class ReducerKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REDUCER_KIND_UNSPECIFIED: _ClassVar[ReducerKind]
    REDUCER_KIND_PASS_AT_K: _ClassVar[ReducerKind]
    REDUCER_KIND_PASS_HAT_K: _ClassVar[ReducerKind]
    REDUCER_KIND_MAJORITY: _ClassVar[ReducerKind]
    REDUCER_KIND_MEAN: _ClassVar[ReducerKind]
TASK_TYPE_UNSPECIFIED: TaskType
TASK_TYPE_CLASSIFICATION: TaskType
TASK_TYPE_QA: TaskType
TASK_TYPE_NER: TaskType
TASK_TYPE_SUMMARIZATION: TaskType
TASK_TYPE_GENERATION: TaskType
TASK_TYPE_MULTIPLE_CHOICE: TaskType
TASK_TYPE_CODE: TaskType
TASK_TYPE_TOOL_CALL: TaskType
TASK_TYPE_STRUCTURED_OUTPUT: TaskType
SHOT_FORMAT_UNSPECIFIED: ShotFormat
SHOT_FORMAT_SINGLE_MESSAGE: ShotFormat
SHOT_FORMAT_CHAT_TURNS: ShotFormat
JUDGE_SCORE_FORMAT_UNSPECIFIED: JudgeScoreFormat
JUDGE_SCORE_FORMAT_PASS_FAIL: JudgeScoreFormat
JUDGE_SCORE_FORMAT_SCALE: JudgeScoreFormat
CHOICE_SCORING_UNSPECIFIED: ChoiceScoring
CHOICE_SCORING_TEXT: ChoiceScoring
CHOICE_SCORING_LOGPROBS: ChoiceScoring
CHOICE_SCORING_LOGLIKELIHOOD: ChoiceScoring
CHOICE_CONTINUATION_UNSPECIFIED: ChoiceContinuation
CHOICE_CONTINUATION_LETTERS: ChoiceContinuation
CHOICE_CONTINUATION_TEXTS: ChoiceContinuation
PROMPT_FORMAT_UNSPECIFIED: PromptFormat
PROMPT_FORMAT_CHAT: PromptFormat
PROMPT_FORMAT_PLAIN: PromptFormat
SUBTASK_STATE_UNSPECIFIED: SubtaskState
SUBTASK_STATE_PENDING: SubtaskState
SUBTASK_STATE_RUNNING: SubtaskState
SUBTASK_STATE_SUCCEEDED: SubtaskState
SUBTASK_STATE_FAILED: SubtaskState
SUBTASK_STATE_FAILED_PERMANENT: SubtaskState
SUBTASK_STATE_CANCELLED: SubtaskState
TASK_STATE_UNSPECIFIED: TaskState
TASK_STATE_PENDING: TaskState
TASK_STATE_RUNNING: TaskState
TASK_STATE_SCORING: TaskState
TASK_STATE_SUCCEEDED: TaskState
TASK_STATE_PARTIAL: TaskState
TASK_STATE_FAILED: TaskState
TASK_STATE_CANCELLED: TaskState
RUN_STATE_UNSPECIFIED: RunState
RUN_STATE_PENDING: RunState
RUN_STATE_RUNNING: RunState
RUN_STATE_SUCCEEDED: RunState
RUN_STATE_PARTIAL: RunState
RUN_STATE_FAILED: RunState
RUN_STATE_CANCELLED: RunState
RESULT_STATUS_UNSPECIFIED: ResultStatus
RESULT_STATUS_SUCCESS: ResultStatus
RESULT_STATUS_PARTIAL_SUCCESS: ResultStatus
RESULT_STATUS_FAILED: ResultStatus
RESULT_STATUS_CANCELLED: ResultStatus
REDUCER_KIND_UNSPECIFIED: ReducerKind
REDUCER_KIND_PASS_AT_K: ReducerKind
REDUCER_KIND_PASS_HAT_K: ReducerKind
REDUCER_KIND_MAJORITY: ReducerKind
REDUCER_KIND_MEAN: ReducerKind
