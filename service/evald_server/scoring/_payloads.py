"""Per-task-type result payloads; each maps 1:1 to an ``evald.v1`` proto message."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WorstExample:
    record_id: str
    repeat_index: int
    input: str  # truncated
    expected: str  # truncated
    output: str  # truncated
    score: float  # the scorer's primary per-sample score
    note: str  # why it scored low (flags, the predicted label, ...)


@dataclass(frozen=True, slots=True)
class ClassMetrics:
    label: str
    precision: float
    recall: float
    f1: float
    support: int


@dataclass(frozen=True, slots=True)
class ClassificationPayload:
    labels: tuple[str, ...]
    # Row = gold, column = predicted, both in ``labels`` order. Empty when there are
    # more labels than the confusion cap (the matrix would be quadratic in size).
    confusion: tuple[tuple[int, ...], ...]
    # Outputs mapped to no label, per gold label (the matrix's extra column; empty
    # exactly when ``confusion`` is).
    unmapped_by_gold: tuple[int, ...]
    per_class: tuple[ClassMetrics, ...]
    unmapped_outputs: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True)
class QaPayload:
    exact_match: float
    f1: float
    answered: int  # outputs that are non-empty after SQuAD normalisation
    no_answer_outputs: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True)
class EntityTypeMetrics:
    entity_type: str
    precision: float
    recall: float
    f1: float
    support: int  # gold entities of this type
    predicted: int  # predicted entities of this type


@dataclass(frozen=True, slots=True)
class NerPayload:
    per_type: tuple[EntityTypeMetrics, ...]
    unparseable_outputs: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True)
class RougeScore:
    rouge_type: str  # "rouge1" | "rouge2" | "rougeL" | "rougeLsum"
    precision: float
    recall: float
    fmeasure: float


@dataclass(frozen=True, slots=True)
class SummarizationPayload:
    rouge: tuple[RougeScore, ...]
    stemming: bool
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True)
class MatchModeStats:
    match_mode: str  # "exact" | "contains" | "regex" | "numeric"
    samples: int
    correct: int


@dataclass(frozen=True, slots=True)
class GenerationPayload:
    per_mode: tuple[MatchModeStats, ...]
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True)
class ChoiceLetterStats:
    letter: str
    gold: int  # samples whose gold answer is this letter
    predicted: int  # samples mapped to this letter
    correct: int  # samples of this gold letter answered right


@dataclass(frozen=True, slots=True)
class SubjectAccuracy:
    subject: str  # the record's metadata.subject ("" when it has none)
    samples: int
    correct: int
    accuracy: float


@dataclass(frozen=True, slots=True)
class ExtractionRuleCount:
    rule: str  # an extraction rule, "logprobs" or "unmapped"
    samples: int


@dataclass(frozen=True, slots=True)
class MultipleChoicePayload:
    accuracy: float
    unmapped_outputs: int
    letters: tuple[ChoiceLetterStats, ...]  # A up to the most choices any record has
    subjects: tuple[SubjectAccuracy, ...]  # sorted by subject; empty without subjects
    subject_macro_accuracy: float  # unweighted mean over ``subjects`` (0 without)
    extraction_rules: tuple[ExtractionRuleCount, ...]  # rule order, only rules used
    logprob_scored: int
    logprob_fallbacks: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True)
class PassAtK:
    k: int
    value: float  # mean over ``problems`` of 1 - C(n-c, k) / C(n, k)
    problems: int  # problems with at least k scored samples
    problems_left_out: int  # problems with fewer


@dataclass(frozen=True, slots=True)
class CodeVerdictCount:
    verdict: str  # passed, failed, error, timeout, resource_limit, no_program
    samples: int


@dataclass(frozen=True, slots=True)
class CodePayload:
    pass_at_1: float
    pass_at_k: tuple[PassAtK, ...]  # increasing k, pass@1 first
    verdicts: tuple[CodeVerdictCount, ...]  # every verdict, in the documented order
    problems: int  # records with at least one scored sample
    extraction_rules: tuple[ExtractionRuleCount, ...]  # rules that read a program
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True)
class ToolCallPayload:
    exact_match: float
    argument_accuracy: float
    call_precision: float  # micro: matched calls / calls made
    call_recall: float  # micro: matched calls / calls expected
    call_f1: float
    no_call: int
    malformed_arguments: int
    wrong_name: int
    extra_calls: int
    wrong_argument_type: int
    calls_made: int
    calls_expected: int
    worst_examples: tuple[WorstExample, ...]


@dataclass(frozen=True, slots=True)
class StructuredOutputPayload:
    schema_valid_rate: float
    json_valid_rate: float
    field_exact_match: float  # over the samples with a reference
    field_f1: float  # over the samples with a reference
    invalid_json: int
    schema_violations: int
    with_reference: int
    worst_examples: tuple[WorstExample, ...]
