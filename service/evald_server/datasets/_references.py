"""The gold side of a record as text: what a sample row shows as "expected", and what
the simulated provider answers when it is "right" (or, plausibly, when it is wrong)."""

import json
import re
from collections.abc import Mapping
from typing import Any

from evald_server.datasets._bio import bio_entities
from evald_server.datasets._choices import choice_letter, gold_choice_index
from evald_server.datasets._numbers import reference_number
from evald_server.domain import TaskType, ToolCall, encode_tool_answer

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def gold_entities(fields: Mapping[str, Any]) -> list[dict[str, str]]:
    """Gold entities of an NER record in either form (spans, or BIO tokens + tags)."""
    if "entities" in fields:
        return [{"text": e["text"], "type": e["type"]} for e in fields["entities"]]
    return bio_entities(fields["tokens"], fields["tags"])


def expected_text(task_type: TaskType, fields: Mapping[str, Any]) -> str:
    """The gold answer as one string (all acceptable answers for QA, joined by `` | ``)."""
    if task_type is TaskType.CLASSIFICATION:
        return str(fields["label"])
    if task_type is TaskType.QA:
        return " | ".join(fields["answers"])
    if task_type is TaskType.NER:
        return json.dumps(gold_entities(fields), ensure_ascii=False)
    if task_type is TaskType.SUMMARIZATION:
        return str(fields["summary"])
    if task_type is TaskType.MULTIPLE_CHOICE:
        index = gold_choice_index(fields)
        return f"{choice_letter(index)}. {fields['choices'][index]}"
    if task_type is TaskType.CODE:
        return code_solution(fields)
    if task_type is TaskType.TOOL_CALL:
        return json.dumps(fields["expected_calls"], ensure_ascii=False)
    if task_type is TaskType.STRUCTURED_OUTPUT:
        if "reference" in fields:
            return json.dumps(fields["reference"], ensure_ascii=False)
        return "(any JSON value that follows the schema)"
    return str(fields["reference"])


def code_solution(fields: Mapping[str, Any]) -> str:
    """A code record's reference solution as a whole program: HumanEval's prompt with
    its canonical solution, MBPP's ``code``; "" when the record has none."""
    if "prompt" in fields:
        solution = fields.get("canonical_solution")
        return "" if solution is None else str(fields["prompt"]) + str(solution)
    return str(fields.get("code") or "")


def shot_answer(task_type: TaskType, fields: Mapping[str, Any]) -> str:
    """A solved example's answer as a k-shot prompt shows it: the label, the first
    answer, the entities as JSON, the summary, the choice letter, the reference."""
    if task_type is TaskType.QA:
        return str(fields["answers"][0])
    if task_type is TaskType.MULTIPLE_CHOICE:
        return choice_letter(gold_choice_index(fields))
    return expected_text(task_type, fields)


def _number_text(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:g}"


def simulator_reference(task_type: TaskType, fields: Mapping[str, Any]) -> dict[str, Any]:
    """What the simulator answers: ``{"expected": perfect, "distractors": plausible wrong}``."""
    if task_type is TaskType.CLASSIFICATION:
        label = str(fields["label"])
        others = [c for c in fields.get("choices", []) if c != label]
        return {"expected": label, "distractors": others or [f"not {label}"]}
    if task_type is TaskType.QA:
        answer = fields["answers"][0]
        context_words = str(fields.get("context", "")).split()
        wrong = " ".join(w for w in context_words[:4] if w not in answer) or "I don't know"
        return {"expected": answer, "distractors": [wrong]}
    if task_type is TaskType.NER:
        entities = gold_entities(fields)
        distractors = [
            json.dumps(entities[1:]),
            json.dumps([{**e, "type": "MISC"} for e in entities]),
        ]
        return {"expected": json.dumps(entities, ensure_ascii=False), "distractors": distractors}
    if task_type is TaskType.SUMMARIZATION:
        lead = " ".join(_SENTENCE_END.split(str(fields["document"]))[:2])
        return {"expected": fields["summary"], "distractors": [lead]}
    if task_type is TaskType.MULTIPLE_CHOICE:
        gold = gold_choice_index(fields)
        letters = [choice_letter(i) for i in range(len(fields["choices"]))]
        return {"expected": letters[gold], "distractors": letters[:gold] + letters[gold + 1 :]}
    if task_type is TaskType.CODE:
        # Right: the reference solution, fenced; wrong: a fenced program that defines
        # nothing the tests call (no reference: the simulator is never right).
        solution = code_solution(fields)
        wrong = "```python\nraise NotImplementedError\n```"
        return {
            "expected": f"```python\n{solution}\n```" if solution else wrong,
            "distractors": [wrong],
        }
    if task_type is TaskType.TOOL_CALL:
        return _simulated_tool_answers(fields)
    if task_type is TaskType.STRUCTURED_OUTPUT:
        reference = fields.get("reference")
        expected = "{}" if reference is None else json.dumps(reference, ensure_ascii=False)
        return {"expected": expected, "distractors": ["not JSON"]}
    reference = str(fields["reference"])
    if fields.get("match") == "numeric":
        number = reference_number(reference)
        assert number is not None  # validated at upload
        return {"expected": _number_text(number), "distractors": [_number_text(number + 1)]}
    if fields.get("match") == "regex":
        # A regex reference has no canonical answer text; the simulator cannot be "right".
        return {"expected": reference, "distractors": ["no match"]}
    return {"expected": reference, "distractors": [" ".join(reversed(reference.split())) + "?"]}


def _simulated_tool_answers(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The expected calls as a stored tool answer, and two wrong ones (no call, and
    the calls with an unknown function name)."""
    calls = tuple(
        ToolCall(call["name"], call.get("arguments", {})) for call in fields["expected_calls"]
    )
    renamed = tuple(ToolCall(f"not_{call.name}", call.arguments) for call in calls)
    return {
        "expected": encode_tool_answer("", calls),
        "distractors": [
            encode_tool_answer("I cannot help with that.", ()),
            encode_tool_answer("", renamed),
        ],
    }
