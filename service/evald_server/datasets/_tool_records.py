"""Tool-call and structured-output records: the tools offered, the calls expected, the
JSON Schema an answer must follow.

Tools are OpenAI function schemas (``{"type": "function", "function": {"name",
"description", "parameters"}}``), sent to the model as they are. Everything in them
is checked here, at upload: bounded counts and sizes, function names as OpenAI allows
them, ``parameters`` a JSON Schema that ``_json_schemas`` accepts, and every expected
call naming an offered function with arguments (and alternatives) its parameters
allow. A record that passes cannot fail later for its own sake.
"""

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, model_validator

from evald_server.datasets._json_schemas import schema_problem, validator_of

MAX_TOOLS = 64  # functions offered by one record
MAX_EXPECTED_CALLS = 16  # calls one record expects
MAX_ALTERNATIVES = 32  # extra allowed values of one argument
MAX_DESCRIPTION_CHARS = 4_096
_FUNCTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names


class ToolFunction(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: StrictStr
    description: Annotated[StrictStr, Field(max_length=MAX_DESCRIPTION_CHARS)] | None = None
    parameters: dict[str, Any] | None = None
    strict: StrictBool | None = None

    @model_validator(mode="after")
    def _valid(self) -> "ToolFunction":
        if not _FUNCTION_NAME.match(self.name):
            raise ValueError(f"name: {self.name!r} is not 1-64 of A-Z, a-z, 0-9, _ and -")
        if self.parameters is not None:
            problem = schema_problem(self.parameters, "parameters")
            if problem is not None:
                raise ValueError(problem)
            if self.parameters.get("type", "object") != "object":
                raise ValueError("parameters.type: must be 'object' (arguments are an object)")
        return self


class Tool(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["function"]
    function: ToolFunction


class ExpectedCall(BaseModel):
    """One call the model should make: ``arguments`` the expected values, and per
    argument the other values also accepted (``alternatives``); an argument whose
    accepted values include null may be left out."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: StrictStr
    arguments: dict[str, Any] = Field(default_factory=dict)
    alternatives: dict[str, Annotated[list[Any], Field(max_length=MAX_ALTERNATIVES)]] = Field(
        default_factory=dict
    )


class ToolChoiceFunction(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: StrictStr


class NamedToolChoice(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["function"]
    function: ToolChoiceFunction


def check_tool_call_record(
    tools: list[Tool],
    expected: list[ExpectedCall],
    tool_choice: str | NamedToolChoice | None,
) -> None:
    """Raise ``ValueError("field: problem")`` for what contradicts itself in a record."""
    functions = {}
    for index, tool in enumerate(tools):
        name = tool.function.name
        if name in functions:
            raise ValueError(f"tools[{index}].function.name: {name!r} is offered twice")
        functions[name] = tool.function
    if isinstance(tool_choice, NamedToolChoice) and tool_choice.function.name not in functions:
        raise ValueError(f"tool_choice.function.name: {tool_choice.function.name!r} is no tool")
    for index, call in enumerate(expected):
        where = f"expected_calls[{index}]"
        function = functions.get(call.name)
        if function is None:
            raise ValueError(f"{where}.name: {call.name!r} is not one of the tools")
        for argument in call.alternatives:
            if argument not in call.arguments:
                raise ValueError(f"{where}.alternatives.{argument}: no expected value in arguments")
        _check_arguments(where, call, function.parameters or {})


def _check_arguments(where: str, call: ExpectedCall, parameters: dict[str, Any]) -> None:
    properties = parameters.get("properties")
    if isinstance(properties, dict) and parameters.get("additionalProperties") is False:
        for argument in call.arguments:
            if argument not in properties:
                raise ValueError(f"{where}.arguments.{argument}: not a parameter of {call.name}")
    if not isinstance(properties, dict):
        return
    for argument, value in call.arguments.items():
        schema = properties.get(argument)
        if schema is None:
            continue
        validator = validator_of(json.dumps(schema, sort_keys=True))
        for position, allowed in enumerate([value, *call.alternatives.get(argument, [])]):
            if allowed is None and position > 0:
                continue  # null: the argument may be left out
            if not validator.is_valid(allowed):
                field = (
                    f"arguments.{argument}"
                    if position == 0
                    else f"alternatives.{argument}[{position - 1}]"
                )
                raise ValueError(
                    f"{where}.{field}: {allowed!r} does not fit the parameter's schema"
                )
