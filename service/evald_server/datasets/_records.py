"""Record schemas, one pydantic model per task type.

Every record may carry an ``id`` (string or integer; unique within the dataset; the
line number otherwise) and a ``metadata`` object. Unknown fields are rejected so that
a typo (``lable``) fails the upload instead of silently dropping the gold data.
"""

import json
import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    model_validator,
)

from evald_server.datasets._choices import MAX_CHOICES, choice_letter, gold_choice_index
from evald_server.datasets._code_records import CodeRecord
from evald_server.datasets._json_schemas import schema_problem, validator_of
from evald_server.datasets._numbers import reference_number
from evald_server.datasets._regex import InvalidRegex, compile_regex
from evald_server.datasets._tool_records import (
    MAX_EXPECTED_CALLS,
    MAX_TOOLS,
    ExpectedCall,
    NamedToolChoice,
    Tool,
    check_tool_call_record,
)
from evald_server.domain import TaskType


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("must not be blank (whitespace only)")
    return text


# Text that a prompt or a score is made of: a blank one would make every sample alike.
NonEmpty = Annotated[StrictStr, Field(min_length=1), AfterValidator(_not_blank)]
_BIO_TAG = re.compile(r"^(O|[BI]-\S+)$")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: StrictStr | StrictInt | None = None
    metadata: dict[str, Any] | None = None


class ClassificationRecord(_Record):
    input: NonEmpty
    label: NonEmpty
    choices: Annotated[list[NonEmpty], Field(min_length=2)] | None = None

    @model_validator(mode="after")
    def _label_in_choices(self) -> "ClassificationRecord":
        if self.choices is not None:
            if len(set(self.choices)) != len(self.choices):
                raise ValueError("choices: must be unique")
            if self.label not in self.choices:
                raise ValueError(f"label: {self.label!r} is not one of choices")
        return self


class QaRecord(_Record):
    question: NonEmpty
    context: StrictStr | None = None
    answers: Annotated[list[NonEmpty], Field(min_length=1)]


class Entity(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: NonEmpty
    type: NonEmpty


class NerRecord(_Record):
    text: NonEmpty | None = None
    entities: list[Entity] | None = None
    tokens: list[StrictStr] | None = None
    tags: list[StrictStr] | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "NerRecord":
        span_form = self.text is not None or self.entities is not None
        bio_form = self.tokens is not None or self.tags is not None
        if span_form and bio_form:
            raise ValueError("use either text + entities or tokens + tags, not both")
        if span_form:
            if self.text is None or self.entities is None:
                raise ValueError(
                    f"{'entities' if self.text is not None else 'text'}: Field required"
                )
            for index, entity in enumerate(self.entities):
                if entity.text not in self.text:
                    raise ValueError(
                        f"entities[{index}].text: {entity.text!r} does not occur in text"
                    )
            return self
        if self.tokens is None or self.tags is None:
            missing = "tags" if self.tokens is not None else "tokens" if bio_form else "text"
            raise ValueError(f"{missing}: Field required")
        if not self.tokens:
            raise ValueError("tokens: must not be empty")
        if len(self.tokens) != len(self.tags):
            raise ValueError(
                f"tags: {len(self.tags)} tags for {len(self.tokens)} tokens (must be equal)"
            )
        for index, tag in enumerate(self.tags):
            if not _BIO_TAG.match(tag):
                raise ValueError(f"tags[{index}]: {tag!r} is not a BIO tag (O, B-TYPE, I-TYPE)")
        return self


class SummarizationRecord(_Record):
    document: NonEmpty
    summary: NonEmpty


class GenerationRecord(_Record):
    input: NonEmpty
    reference: NonEmpty
    match: Literal["exact", "contains", "regex", "numeric"] = "exact"

    @model_validator(mode="after")
    def _reference_fits_match(self) -> "GenerationRecord":
        if self.match == "regex":
            try:
                compile_regex(self.reference)
            except InvalidRegex as exc:
                raise ValueError(f"reference: invalid regex: {exc}") from exc
        if self.match == "numeric" and reference_number(self.reference) is None:
            raise ValueError("reference: no number found for match 'numeric'")
        return self


class MultipleChoiceRecord(_Record):
    """A question with its own choices (2-26, lettered A, B, ... in order) and the gold
    choice as ``answer_index`` (0-based) or ``answer_letter`` ("A"-"Z"), not both."""

    question: NonEmpty
    context: StrictStr | None = None
    choices: Annotated[list[NonEmpty], Field(min_length=2, max_length=MAX_CHOICES)]
    answer_index: Annotated[StrictInt, Field(ge=0)] | None = None
    answer_letter: Annotated[StrictStr, Field(pattern=r"^[A-Za-z]$")] | None = None

    @model_validator(mode="after")
    def _one_gold_in_range(self) -> "MultipleChoiceRecord":
        if (self.answer_index is None) == (self.answer_letter is None):
            if self.answer_index is None:
                raise ValueError("answer_index: Field required (or answer_letter)")
            raise ValueError("answer_letter: give answer_index or answer_letter, not both")
        index = gold_choice_index(self.model_dump(exclude_none=True))
        if index >= len(self.choices):
            field = "answer_index" if self.answer_index is not None else "answer_letter"
            raise ValueError(
                f"{field}: choice {choice_letter(index)} (index {index}) is beyond the "
                f"{len(self.choices)} choices"
            )
        return self


class ToolCallRecord(_Record):
    """A request with the tools offered (OpenAI function schemas), the expected calls
    (none: the model should answer without calling), and the ``tool_choice`` sent."""

    input: NonEmpty
    tools: Annotated[list[Tool], Field(min_length=1, max_length=MAX_TOOLS)]
    expected_calls: Annotated[list[ExpectedCall], Field(max_length=MAX_EXPECTED_CALLS)]
    tool_choice: Literal["auto", "required", "none"] | NamedToolChoice | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "ToolCallRecord":
        check_tool_call_record(self.tools, self.expected_calls, self.tool_choice)
        return self


class StructuredOutputRecord(_Record):
    """A request whose answer must be JSON following ``json_schema``; ``reference``
    (which must follow it too) is the answer expected field by field, when there is one."""

    input: NonEmpty
    json_schema: dict[str, Any]
    reference: Any = None

    @model_validator(mode="after")
    def _valid_schema(self) -> "StructuredOutputRecord":
        problem = schema_problem(self.json_schema, "json_schema")
        if problem is not None:
            raise ValueError(problem)
        validator = validator_of(json.dumps(self.json_schema, sort_keys=True))
        if self.reference is not None and not validator.is_valid(self.reference):
            raise ValueError("reference: does not follow the record's schema")
        return self


RECORD_MODELS: dict[TaskType, type[BaseModel]] = {
    TaskType.CLASSIFICATION: ClassificationRecord,
    TaskType.QA: QaRecord,
    TaskType.NER: NerRecord,
    TaskType.SUMMARIZATION: SummarizationRecord,
    TaskType.GENERATION: GenerationRecord,
    TaskType.MULTIPLE_CHOICE: MultipleChoiceRecord,
    TaskType.CODE: CodeRecord,  # HumanEval- or MBPP-shaped (_code_records)
    TaskType.TOOL_CALL: ToolCallRecord,
    TaskType.STRUCTURED_OUTPUT: StructuredOutputRecord,
}
