"""What the judge tests share: a small generation dataset whose prompts name their
record, an answering model and a scripted pass/fail judge for the fake provider, the
two-model config, and a judged run driven through the SDK to its end."""

import re
from pathlib import Path
from typing import Any

import anyio

from evald_client import AsyncEvaldClient, JudgeOptions, RetryPolicy
from evald_server.config import ServerConfig, parse_config
from evald_server.fake_provider import FakeChatRequest, FakeProvider
from tests.harness import config_data

N = 20
PASSING = {0, 2, 3, 5, 7, 11, 13, 17, 19}  # the records the scripted judge passes
RECORDS = [
    {"id": f"r{i}", "input": f"Question {i}: what is {i} + 1?", "reference": f"{i + 1}"}
    for i in range(N)
]
_QUESTION = re.compile(r"Question (\d+):")
RUBRIC = "Grade the answer.\nTask: {input}\nReference: {reference}\nAnswer: {output}"


def record_of(chat: FakeChatRequest) -> int:
    match = _QUESTION.search(chat.last_content)
    assert match is not None, chat.last_content
    return int(match.group(1))


def answer(chat: FakeChatRequest) -> str:
    """The answering model: a plain answer naming the record."""
    return f"The answer to question {record_of(chat)} is {record_of(chat) + 1}."


def pass_fail_judge(chat: FakeChatRequest) -> str:
    i = record_of(chat)
    verdict = "PASS" if i in PASSING else "FAIL"
    return f"Record {i} looks {'right' if i in PASSING else 'wrong'}.\nVERDICT: {verdict}"


def judge_config(
    tmp_path: Path, answering: FakeProvider, judging: FakeProvider, **options: Any
) -> ServerConfig:
    """Model ``cand`` on ``answering`` (max_concurrency 4) and ``judge`` on ``judging``
    (max_concurrency 2); ``options`` as ``judge_config_data`` takes them."""
    return parse_config(judge_config_data(tmp_path, answering, judging, **options))


def judge_config_data(
    tmp_path: Path,
    answering: FakeProvider,
    judging: FakeProvider,
    *,
    cand: dict[str, Any] | None = None,
    judge: dict[str, Any] | None = None,
    engine: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``judge_config``'s document (for a server process too): ``cand`` and ``judge`` add
    to (or override) their model tables, ``engine`` tunes the engine. The store is
    ``tmp_path``'s: every config of one test shares it (a restart)."""
    return config_data(
        tmp_path,
        engine=engine,
        models=[
            {"id": "cand", "provider": "openai", "base_url": answering.base_url,
             "model": "cand-llm", "max_concurrency": 4, **(cand or {})},
            {"id": "judge", "provider": "openai", "base_url": judging.base_url,
             "model": "judge-llm", "max_concurrency": 2, **(judge or {})},
        ],
    )  # fmt: skip


async def judged_run(
    client: AsyncEvaldClient,
    judge: JudgeOptions,
    *,
    retries: int = 3,
    records: list[dict[str, Any]] | None = None,
    **run: Any,
) -> tuple[Any, Any, list[Any]]:
    """Upload ``records`` (default RECORDS), run them on ``cand`` judged by ``judge``
    (``run``: more CreateRun options), wait for the end: (run, its result, its samples)."""
    await client.upload_dataset(
        name="arith", version="1.0.0", task_type="generation", records=records or RECORDS
    )
    created = await client.create_run(
        models=["cand"],
        datasets=[("arith", "1.0.0")],
        judge=judge,
        retry_policy=RetryPolicy(max_retries=retries, backoff_s=(0.01,), jitter_fraction=0.0),
        **run,
    )
    assert created.spec.judge is not None
    assert created.spec.judge.model_id == judge.model_id
    with anyio.fail_after(60):
        final = await client.wait(created.run_id)
    (result,) = await client.results(created.run_id)
    samples = [s async for s in client.samples(created.run_id)]
    return final, result, samples


# How a judge model reads a fenced prompt: the fence from the notice, then each data
# block up to the first end line of its name. (A prompt without a notice has no data.)
_NOTICE_FENCE = re.compile(r"^Text between a line \[(\S+) NAME\]")


def _blocks(prompt: str) -> re.Pattern[str] | None:
    found = _NOTICE_FENCE.match(prompt)
    if found is None:
        return None
    fence = re.escape(found.group(1))
    return re.compile(rf"\[{fence} (\w+)\]\n(.*?)\n\[/{fence} \1\]", re.S)


def data_blocks(prompt: str) -> list[tuple[str, str]]:
    """The prompt's data blocks, (name, text), in order."""
    pattern = _blocks(prompt)
    return [] if pattern is None else [(m[1], m[2]) for m in pattern.finditer(prompt)]


def outside_data(prompt: str) -> str:
    """What a judge takes for instructions: the prompt less its data blocks."""
    pattern = _blocks(prompt)
    return prompt if pattern is None else pattern.sub("", prompt)
