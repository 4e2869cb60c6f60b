"""Dataset JSON Schemas: whatever JSON a dataset holds, the upload check answers with a
problem or None (never raises), and an accepted schema's validator never fetches."""

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evald_server.datasets import schema_problem, schema_validator

KEYWORDS = st.sampled_from(
    ["type", "properties", "items", "$ref", "$schema", "$defs", "pattern", "enum", "allOf",
     "anyOf", "not", "required", "minimum", "$id", "$dynamicRef", "additionalProperties",
     "prefixItems", "if", "then", "const", "format", "x"]
)  # fmt: skip
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
)
VALUES = st.recursive(
    SCALARS | st.sampled_from(["#", "#/$defs/a", "object", "string", "^a+$", "(a)\\1"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYWORDS, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=st.dictionaries(KEYWORDS, VALUES, max_size=5), instance=VALUES)
def test_the_check_answers_and_an_accepted_schema_validates(
    schema: dict[str, Any], instance: Any
) -> None:
    problem = schema_problem(schema, "json_schema")
    assert problem is None or problem.startswith("json_schema")
    if problem is None:
        schema_validator(json.loads(json.dumps(schema))).is_valid(instance)  # no raise
