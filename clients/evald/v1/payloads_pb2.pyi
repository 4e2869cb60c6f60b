from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorstExample(_message.Message):
    __slots__ = ("record_id", "repeat_index", "input", "expected", "output", "score", "note", "truncated")
    RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    REPEAT_INDEX_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    record_id: str
    repeat_index: int
    input: str
    expected: str
    output: str
    score: float
    note: str
    truncated: bool
    def __init__(self, record_id: _Optional[str] = ..., repeat_index: _Optional[int] = ..., input: _Optional[str] = ..., expected: _Optional[str] = ..., output: _Optional[str] = ..., score: _Optional[float] = ..., note: _Optional[str] = ..., truncated: _Optional[bool] = ...) -> None: ...

class ClassificationPayload(_message.Message):
    __slots__ = ("labels", "confusion_matrix", "per_class", "unmapped_outputs", "worst_examples")
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CONFUSION_MATRIX_FIELD_NUMBER: _ClassVar[int]
    PER_CLASS_FIELD_NUMBER: _ClassVar[int]
    UNMAPPED_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.RepeatedScalarFieldContainer[str]
    confusion_matrix: ConfusionMatrix
    per_class: _containers.RepeatedCompositeFieldContainer[ClassMetrics]
    unmapped_outputs: int
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, labels: _Optional[_Iterable[str]] = ..., confusion_matrix: _Optional[_Union[ConfusionMatrix, _Mapping]] = ..., per_class: _Optional[_Iterable[_Union[ClassMetrics, _Mapping]]] = ..., unmapped_outputs: _Optional[int] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...

class ConfusionMatrix(_message.Message):
    __slots__ = ("labels", "rows")
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    labels: _containers.RepeatedScalarFieldContainer[str]
    rows: _containers.RepeatedCompositeFieldContainer[ConfusionMatrixRow]
    def __init__(self, labels: _Optional[_Iterable[str]] = ..., rows: _Optional[_Iterable[_Union[ConfusionMatrixRow, _Mapping]]] = ...) -> None: ...

class ConfusionMatrixRow(_message.Message):
    __slots__ = ("counts", "unmapped")
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    UNMAPPED_FIELD_NUMBER: _ClassVar[int]
    counts: _containers.RepeatedScalarFieldContainer[int]
    unmapped: int
    def __init__(self, counts: _Optional[_Iterable[int]] = ..., unmapped: _Optional[int] = ...) -> None: ...

class ClassMetrics(_message.Message):
    __slots__ = ("label", "precision", "recall", "f1", "support")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    RECALL_FIELD_NUMBER: _ClassVar[int]
    F1_FIELD_NUMBER: _ClassVar[int]
    SUPPORT_FIELD_NUMBER: _ClassVar[int]
    label: str
    precision: float
    recall: float
    f1: float
    support: int
    def __init__(self, label: _Optional[str] = ..., precision: _Optional[float] = ..., recall: _Optional[float] = ..., f1: _Optional[float] = ..., support: _Optional[int] = ...) -> None: ...

class QaPayload(_message.Message):
    __slots__ = ("exact_match", "f1", "answered", "no_answer_outputs", "worst_examples")
    EXACT_MATCH_FIELD_NUMBER: _ClassVar[int]
    F1_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_FIELD_NUMBER: _ClassVar[int]
    NO_ANSWER_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    exact_match: float
    f1: float
    answered: int
    no_answer_outputs: int
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, exact_match: _Optional[float] = ..., f1: _Optional[float] = ..., answered: _Optional[int] = ..., no_answer_outputs: _Optional[int] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...

class NerPayload(_message.Message):
    __slots__ = ("per_type", "unparseable_outputs", "worst_examples")
    PER_TYPE_FIELD_NUMBER: _ClassVar[int]
    UNPARSEABLE_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    per_type: _containers.RepeatedCompositeFieldContainer[EntityTypeMetrics]
    unparseable_outputs: int
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, per_type: _Optional[_Iterable[_Union[EntityTypeMetrics, _Mapping]]] = ..., unparseable_outputs: _Optional[int] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...

class EntityTypeMetrics(_message.Message):
    __slots__ = ("entity_type", "precision", "recall", "f1", "support", "predicted")
    ENTITY_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    RECALL_FIELD_NUMBER: _ClassVar[int]
    F1_FIELD_NUMBER: _ClassVar[int]
    SUPPORT_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_FIELD_NUMBER: _ClassVar[int]
    entity_type: str
    precision: float
    recall: float
    f1: float
    support: int
    predicted: int
    def __init__(self, entity_type: _Optional[str] = ..., precision: _Optional[float] = ..., recall: _Optional[float] = ..., f1: _Optional[float] = ..., support: _Optional[int] = ..., predicted: _Optional[int] = ...) -> None: ...

class SummarizationPayload(_message.Message):
    __slots__ = ("rouge", "stemming", "worst_examples")
    ROUGE_FIELD_NUMBER: _ClassVar[int]
    STEMMING_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    rouge: _containers.RepeatedCompositeFieldContainer[RougeScore]
    stemming: bool
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, rouge: _Optional[_Iterable[_Union[RougeScore, _Mapping]]] = ..., stemming: _Optional[bool] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...

class RougeScore(_message.Message):
    __slots__ = ("rouge_type", "precision", "recall", "fmeasure")
    ROUGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    RECALL_FIELD_NUMBER: _ClassVar[int]
    FMEASURE_FIELD_NUMBER: _ClassVar[int]
    rouge_type: str
    precision: float
    recall: float
    fmeasure: float
    def __init__(self, rouge_type: _Optional[str] = ..., precision: _Optional[float] = ..., recall: _Optional[float] = ..., fmeasure: _Optional[float] = ...) -> None: ...

class GenerationPayload(_message.Message):
    __slots__ = ("match_modes", "worst_examples")
    MATCH_MODES_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    match_modes: _containers.RepeatedCompositeFieldContainer[MatchModeStats]
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, match_modes: _Optional[_Iterable[_Union[MatchModeStats, _Mapping]]] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...

class MatchModeStats(_message.Message):
    __slots__ = ("match_mode", "samples", "correct")
    MATCH_MODE_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    CORRECT_FIELD_NUMBER: _ClassVar[int]
    match_mode: str
    samples: int
    correct: int
    def __init__(self, match_mode: _Optional[str] = ..., samples: _Optional[int] = ..., correct: _Optional[int] = ...) -> None: ...

class MultipleChoicePayload(_message.Message):
    __slots__ = ("accuracy", "unmapped_outputs", "letters", "subjects", "subject_macro_accuracy", "extraction_rules", "logprob_scored", "logprob_fallbacks", "worst_examples")
    ACCURACY_FIELD_NUMBER: _ClassVar[int]
    UNMAPPED_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    LETTERS_FIELD_NUMBER: _ClassVar[int]
    SUBJECTS_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_MACRO_ACCURACY_FIELD_NUMBER: _ClassVar[int]
    EXTRACTION_RULES_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_SCORED_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FALLBACKS_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    accuracy: float
    unmapped_outputs: int
    letters: _containers.RepeatedCompositeFieldContainer[ChoiceLetterStats]
    subjects: _containers.RepeatedCompositeFieldContainer[SubjectAccuracy]
    subject_macro_accuracy: float
    extraction_rules: _containers.RepeatedCompositeFieldContainer[ExtractionRuleCount]
    logprob_scored: int
    logprob_fallbacks: int
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, accuracy: _Optional[float] = ..., unmapped_outputs: _Optional[int] = ..., letters: _Optional[_Iterable[_Union[ChoiceLetterStats, _Mapping]]] = ..., subjects: _Optional[_Iterable[_Union[SubjectAccuracy, _Mapping]]] = ..., subject_macro_accuracy: _Optional[float] = ..., extraction_rules: _Optional[_Iterable[_Union[ExtractionRuleCount, _Mapping]]] = ..., logprob_scored: _Optional[int] = ..., logprob_fallbacks: _Optional[int] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...

class ChoiceLetterStats(_message.Message):
    __slots__ = ("letter", "gold", "predicted", "correct")
    LETTER_FIELD_NUMBER: _ClassVar[int]
    GOLD_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_FIELD_NUMBER: _ClassVar[int]
    CORRECT_FIELD_NUMBER: _ClassVar[int]
    letter: str
    gold: int
    predicted: int
    correct: int
    def __init__(self, letter: _Optional[str] = ..., gold: _Optional[int] = ..., predicted: _Optional[int] = ..., correct: _Optional[int] = ...) -> None: ...

class SubjectAccuracy(_message.Message):
    __slots__ = ("subject", "samples", "correct", "accuracy")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    CORRECT_FIELD_NUMBER: _ClassVar[int]
    ACCURACY_FIELD_NUMBER: _ClassVar[int]
    subject: str
    samples: int
    correct: int
    accuracy: float
    def __init__(self, subject: _Optional[str] = ..., samples: _Optional[int] = ..., correct: _Optional[int] = ..., accuracy: _Optional[float] = ...) -> None: ...

class ExtractionRuleCount(_message.Message):
    __slots__ = ("rule", "samples")
    RULE_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    rule: str
    samples: int
    def __init__(self, rule: _Optional[str] = ..., samples: _Optional[int] = ...) -> None: ...

class CodePayload(_message.Message):
    __slots__ = ("pass_at_1", "pass_at_k", "verdicts", "problems", "extraction_rules", "worst_examples")
    PASS_AT_1_FIELD_NUMBER: _ClassVar[int]
    PASS_AT_K_FIELD_NUMBER: _ClassVar[int]
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    EXTRACTION_RULES_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    pass_at_1: float
    pass_at_k: _containers.RepeatedCompositeFieldContainer[PassAtK]
    verdicts: _containers.RepeatedCompositeFieldContainer[CodeVerdictCount]
    problems: int
    extraction_rules: _containers.RepeatedCompositeFieldContainer[ExtractionRuleCount]
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, pass_at_1: _Optional[float] = ..., pass_at_k: _Optional[_Iterable[_Union[PassAtK, _Mapping]]] = ..., verdicts: _Optional[_Iterable[_Union[CodeVerdictCount, _Mapping]]] = ..., problems: _Optional[int] = ..., extraction_rules: _Optional[_Iterable[_Union[ExtractionRuleCount, _Mapping]]] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...

class PassAtK(_message.Message):
    __slots__ = ("k", "value", "problems", "problems_left_out")
    K_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_LEFT_OUT_FIELD_NUMBER: _ClassVar[int]
    k: int
    value: float
    problems: int
    problems_left_out: int
    def __init__(self, k: _Optional[int] = ..., value: _Optional[float] = ..., problems: _Optional[int] = ..., problems_left_out: _Optional[int] = ...) -> None: ...

class CodeVerdictCount(_message.Message):
    __slots__ = ("verdict", "samples")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    verdict: str
    samples: int
    def __init__(self, verdict: _Optional[str] = ..., samples: _Optional[int] = ...) -> None: ...

class ToolCallPayload(_message.Message):
    __slots__ = ("exact_match", "argument_accuracy", "call_precision", "call_recall", "call_f1", "no_call", "malformed_arguments", "wrong_name", "extra_calls", "wrong_argument_type", "calls_made", "calls_expected", "worst_examples")
    EXACT_MATCH_FIELD_NUMBER: _ClassVar[int]
    ARGUMENT_ACCURACY_FIELD_NUMBER: _ClassVar[int]
    CALL_PRECISION_FIELD_NUMBER: _ClassVar[int]
    CALL_RECALL_FIELD_NUMBER: _ClassVar[int]
    CALL_F1_FIELD_NUMBER: _ClassVar[int]
    NO_CALL_FIELD_NUMBER: _ClassVar[int]
    MALFORMED_ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    WRONG_NAME_FIELD_NUMBER: _ClassVar[int]
    EXTRA_CALLS_FIELD_NUMBER: _ClassVar[int]
    WRONG_ARGUMENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    CALLS_MADE_FIELD_NUMBER: _ClassVar[int]
    CALLS_EXPECTED_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    exact_match: float
    argument_accuracy: float
    call_precision: float
    call_recall: float
    call_f1: float
    no_call: int
    malformed_arguments: int
    wrong_name: int
    extra_calls: int
    wrong_argument_type: int
    calls_made: int
    calls_expected: int
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, exact_match: _Optional[float] = ..., argument_accuracy: _Optional[float] = ..., call_precision: _Optional[float] = ..., call_recall: _Optional[float] = ..., call_f1: _Optional[float] = ..., no_call: _Optional[int] = ..., malformed_arguments: _Optional[int] = ..., wrong_name: _Optional[int] = ..., extra_calls: _Optional[int] = ..., wrong_argument_type: _Optional[int] = ..., calls_made: _Optional[int] = ..., calls_expected: _Optional[int] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...

class StructuredOutputPayload(_message.Message):
    __slots__ = ("schema_valid_rate", "json_valid_rate", "field_exact_match", "field_f1", "invalid_json", "schema_violations", "with_reference", "worst_examples")
    SCHEMA_VALID_RATE_FIELD_NUMBER: _ClassVar[int]
    JSON_VALID_RATE_FIELD_NUMBER: _ClassVar[int]
    FIELD_EXACT_MATCH_FIELD_NUMBER: _ClassVar[int]
    FIELD_F1_FIELD_NUMBER: _ClassVar[int]
    INVALID_JSON_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    WITH_REFERENCE_FIELD_NUMBER: _ClassVar[int]
    WORST_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    schema_valid_rate: float
    json_valid_rate: float
    field_exact_match: float
    field_f1: float
    invalid_json: int
    schema_violations: int
    with_reference: int
    worst_examples: _containers.RepeatedCompositeFieldContainer[WorstExample]
    def __init__(self, schema_valid_rate: _Optional[float] = ..., json_valid_rate: _Optional[float] = ..., field_exact_match: _Optional[float] = ..., field_f1: _Optional[float] = ..., invalid_json: _Optional[int] = ..., schema_violations: _Optional[int] = ..., with_reference: _Optional[int] = ..., worst_examples: _Optional[_Iterable[_Union[WorstExample, _Mapping]]] = ...) -> None: ...
