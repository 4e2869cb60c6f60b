"""Property tests: the parser and the prompt renderer never fail in an unexpected way."""

# ruff: noqa: PT017 -- a property test inspects the exception hypothesis provoked.

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from evald_server.datasets import parse_jsonl, render_prompt, validate_template
from evald_server.domain import DatasetInvalid, TaskType

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)
field_names = st.sampled_from(
    [
        "id",
        "input",
        "label",
        "choices",
        "question",
        "context",
        "answers",
        "text",
        "entities",
        "tokens",
        "tags",
        "document",
        "summary",
        "reference",
        "match",
        "metadata",
        "other",
    ]
)
records = st.dictionaries(field_names, json_values, max_size=6)


@settings(max_examples=300, deadline=None)
@given(task_type=st.sampled_from(list(TaskType)), data=st.binary(max_size=300))
def test_arbitrary_bytes_either_parse_or_fail_as_dataset_invalid(
    task_type: TaskType, data: bytes
) -> None:
    try:
        parsed = parse_jsonl(task_type, [data], max_records=50, max_record_bytes=200)
    except DatasetInvalid as error:
        assert error.message
        return
    assert parsed.records


@settings(max_examples=300, deadline=None)
@given(task_type=st.sampled_from(list(TaskType)), items=st.lists(records, min_size=1, max_size=4))
def test_json_objects_parse_or_fail_cleanly_and_valid_ones_render(
    task_type: TaskType, items: list[dict[str, object]]
) -> None:
    data = "\n".join(json.dumps(item) for item in items).encode()
    try:
        parsed = parse_jsonl(task_type, [data], max_records=50, max_record_bytes=10_000)
    except DatasetInvalid as error:
        assert error.message.startswith("line ") or error.metadata == {}
        return
    for record in parsed.records:
        (message,) = render_prompt(task_type, record.fields)
        assert isinstance(message.content, str)


@settings(max_examples=300, deadline=None)
@given(template=st.text(max_size=80), value=st.text(max_size=40))
def test_any_template_is_either_rejected_or_renders(template: str, value: str) -> None:
    try:
        validate_template(TaskType.GENERATION, template)
    except DatasetInvalid:
        return
    (message,) = render_prompt(TaskType.GENERATION, {"input": value, "reference": "r"}, template)
    assert message.content.count(value) >= template.count("{input}") if value else True
