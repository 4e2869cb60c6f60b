"""Prompt rendering: a record → the chat messages sent to a model.

A dataset may carry its own template: plain text with ``{placeholder}`` fields and
``{{`` / ``}}`` for literal braces. Only input-side fields can be placeholders — the
gold fields (label, answers, entities, summary, reference) never reach a prompt. An
unknown placeholder is rejected when the dataset is uploaded, not at run time.
"""

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from evald_server.domain import ChatMessage, DatasetInvalid, ErrorReason, FieldViolation, TaskType

# A template is instructions around a record, not a corpus: few-shot prompts fit easily.
MAX_TEMPLATE_CHARS = 65_536

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|\{|\}")

PLACEHOLDERS: dict[TaskType, frozenset[str]] = {
    TaskType.CLASSIFICATION: frozenset({"input", "choices"}),
    TaskType.QA: frozenset({"question", "context"}),
    TaskType.NER: frozenset({"text"}),
    TaskType.SUMMARIZATION: frozenset({"document"}),
    TaskType.GENERATION: frozenset({"input"}),
    # ``subject`` is the record's ``metadata.subject`` (lm-evaluation-harness' MMLU
    # prompt names it), "" when absent.
    TaskType.MULTIPLE_CHOICE: frozenset({"question", "context", "choices", "subject"}),
    # ``prompt`` is HumanEval's code to complete or MBPP's description (``text``);
    # ``tests`` is MBPP's test_list, one per line ("" for HumanEval: its test is hidden).
    TaskType.CODE: frozenset({"prompt", "tests"}),
    # The tools go in the request's ``tools``, not the prompt.
    TaskType.TOOL_CALL: frozenset({"input"}),
    # ``json_schema`` is the record's schema as compact JSON.
    TaskType.STRUCTURED_OUTPUT: frozenset({"input", "json_schema"}),
}


def _choices_block(choices: Sequence[str]) -> str:
    return "\n".join(f"{chr(ord('A') + i)}. {choice}" for i, choice in enumerate(choices))


def _values(task_type: TaskType, fields: Mapping[str, Any]) -> dict[str, str]:
    if task_type is TaskType.CLASSIFICATION:
        return {"input": fields["input"], "choices": _choices_block(fields.get("choices", []))}
    if task_type is TaskType.QA:
        return {"question": fields["question"], "context": fields.get("context", "")}
    if task_type is TaskType.NER:
        text = fields["text"] if "text" in fields else " ".join(fields["tokens"])
        return {"text": text}
    if task_type is TaskType.SUMMARIZATION:
        return {"document": fields["document"]}
    if task_type is TaskType.MULTIPLE_CHOICE:
        metadata = fields.get("metadata") or {}
        subject = metadata.get("subject") if isinstance(metadata, dict) else None
        return {
            "question": fields["question"],
            "context": fields.get("context", ""),
            "choices": _choices_block(fields["choices"]),
            "subject": subject if isinstance(subject, str) else "",
        }
    if task_type is TaskType.CODE:
        if "prompt" in fields:
            return {"prompt": fields["prompt"], "tests": ""}
        return {"prompt": fields["text"], "tests": "\n".join(fields["test_list"])}
    if task_type is TaskType.STRUCTURED_OUTPUT:
        schema = json.dumps(fields["json_schema"], ensure_ascii=False, separators=(",", ":"))
        return {"input": fields["input"], "json_schema": schema}
    return {"input": fields["input"]}


def _default_classification(values: Mapping[str, str]) -> str:
    if values["choices"]:
        return (
            "Classify the input. Answer with the text of exactly one choice.\n\n"
            f"Input: {values['input']}\n\nChoices:\n{values['choices']}\n\nAnswer:"
        )
    return f"Classify the input. Answer with the label only.\n\nInput: {values['input']}\n\nLabel:"


def _default_qa(values: Mapping[str, str]) -> str:
    context = f"Context: {values['context']}\n\n" if values["context"] else ""
    return (
        "Answer the question with a short answer and nothing else.\n\n"
        f"{context}Question: {values['question']}\n\nAnswer:"
    )


def _default_ner(values: Mapping[str, str]) -> str:
    return (
        "Extract the named entities from the text. Reply with a JSON list of objects "
        'with the keys "text" and "type", and nothing else.\n\n'
        f"Text: {values['text']}\n\nEntities:"
    )


def _default_summarization(values: Mapping[str, str]) -> str:
    return (
        f"Summarize the document in a few sentences.\n\nDocument:\n{values['document']}\n\nSummary:"
    )


def _default_generation(values: Mapping[str, str]) -> str:
    return values["input"]


def _default_multiple_choice(values: Mapping[str, str]) -> str:
    context = f"{values['context']}\n\n" if values["context"] else ""
    return (
        "Answer the multiple-choice question with the letter of the correct choice.\n\n"
        f"{context}{values['question']}\n{values['choices']}\nAnswer:"
    )


def _default_code(values: Mapping[str, str]) -> str:
    if values["tests"]:  # MBPP: a description and the asserts the code must pass
        return (
            f"{values['prompt']}\nYour code should pass these tests:\n\n{values['tests']}\n\n"
            "Answer with the Python code in a ```python code block."
        )
    return (
        "Complete the following Python function. Answer with the whole function in a "
        f"```python code block.\n\n```python\n{values['prompt']}```"
    )


def _default_structured_output(values: Mapping[str, str]) -> str:
    # Said even when the model is also sent the schema as its response_format: a model
    # without that support has only this to go by, and one with it loses nothing.
    return (
        f"{values['input']}\n\nReply with JSON that follows this JSON Schema, "
        f"and nothing else:\n{values['json_schema']}"
    )


DEFAULT_TEMPLATES: dict[TaskType, Callable[[Mapping[str, str]], str]] = {
    TaskType.CLASSIFICATION: _default_classification,
    TaskType.QA: _default_qa,
    TaskType.NER: _default_ner,
    TaskType.SUMMARIZATION: _default_summarization,
    TaskType.GENERATION: _default_generation,
    TaskType.MULTIPLE_CHOICE: _default_multiple_choice,
    TaskType.CODE: _default_code,
    TaskType.TOOL_CALL: _default_generation,
    TaskType.STRUCTURED_OUTPUT: _default_structured_output,
}


def _template_problem(problem: str, **metadata: object) -> DatasetInvalid:
    return DatasetInvalid(
        ErrorReason.DATASET_HEADER_INVALID,
        f"prompt_template: {problem}",
        metadata={"field": "prompt_template", **metadata},
        field_violations=(FieldViolation("prompt_template", problem),),
    )


def validate_template(task_type: TaskType, template: str) -> None:
    """Reject unknown placeholders, stray braces, a template without any placeholder
    (every sample would get the same prompt) and one over ``MAX_TEMPLATE_CHARS``."""
    allowed = PLACEHOLDERS[task_type]
    if len(template) > MAX_TEMPLATE_CHARS:
        raise _template_problem(
            f"{len(template)} characters, over the limit of {MAX_TEMPLATE_CHARS}",
            limit="max_template_chars",
            limitValue=MAX_TEMPLATE_CHARS,
        )
    placeholders = 0
    for match in _PLACEHOLDER.finditer(template):
        token, name = match.group(0), match.group(1)
        if token in ("{{", "}}"):
            continue
        if name is None:
            raise _template_problem(
                f"unmatched {token!r} at offset {match.start()} "
                "(write {{ or }} for a literal brace)",
                offset=match.start(),
            )
        if name not in allowed:
            raise _template_problem(
                f"unknown placeholder {{{name}}} for {task_type.value} "
                f"(allowed: {', '.join(sorted(allowed))})",
                placeholder=name,
            )
        placeholders += 1
    if not placeholders:
        raise _template_problem(
            "has no placeholder, so every sample would get the same prompt "
            f"(use one of {', '.join('{' + p + '}' for p in sorted(allowed))})"
        )


def _fill(template: str, values: Mapping[str, str]) -> str:
    def substitute(match: re.Match[str]) -> str:
        token, name = match.group(0), match.group(1)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return values.get(name, "") if name else token

    return _PLACEHOLDER.sub(substitute, template)


def render_prompt(
    task_type: TaskType, fields: Mapping[str, Any], template: str | None = None
) -> tuple[ChatMessage, ...]:
    """The chat messages for one record: the dataset's template, or the task's default."""
    values = _values(task_type, fields)
    text = DEFAULT_TEMPLATES[task_type](values) if template is None else _fill(template, values)
    return (ChatMessage(role="user", content=text),)


def prompt_text(messages: Sequence[ChatMessage]) -> str:
    """The messages as one readable string, for sample rows and worst examples."""
    if len(messages) == 1:
        return messages[0].content
    return "\n\n".join(f"[{message.role}] {message.content}" for message in messages)


def template_sha256(task_type: TaskType, template: str | None) -> str:
    """Identifies the prompt a result was produced with (provenance)."""
    if template is None:
        source = f"default:{task_type.value}:v1"
    else:
        source = json.dumps({"task_type": task_type.value, "template": template})
    return hashlib.sha256(source.encode("utf-8")).hexdigest()
