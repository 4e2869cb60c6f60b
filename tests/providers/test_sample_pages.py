"""Every stored row stays readable through ListSamples, however large the answers.

A real server with a small message limit (256 KiB, so that the test stays small; the
default is 16 MiB) and the fake provider on loopback sending large answers. Before,
one answer larger than the limit made every ListSamples page fail with
RESOURCE_EXHAUSTED (even page_size 1), and a few answers below it broke the default
page.
"""

from pathlib import Path
from typing import Any

import anyio
import grpc
import pytest

from evald.v1 import service_pb2, service_pb2_grpc
from evald_client import AsyncEvaldClient, RetryPolicy
from evald_server.config import parse_config
from evald_server.fake_provider import FakeChatRequest, FakeProvider
from tests.harness import config_data, running_server

pytestmark = pytest.mark.anyio

LIMIT = 256 * 1024
HUGE = 1_000_000  # one answer four times the message limit
LARGE = 50_000  # six of them are over the limit together, each far under it


def _answer(request: FakeChatRequest) -> str:
    text = request.last_content
    if "huge" in text:
        return "é" * (HUGE // 2)  # 2-byte characters: the cut must respect UTF-8
    if "large" in text:
        return "x" * LARGE
    return "short answer"


RECORDS = [
    {"id": "huge", "input": "huge", "label": "pos", "choices": ["pos", "neg"]},
    *(
        {"id": f"large-{i}", "input": f"large {i}", "label": "pos", "choices": ["pos", "neg"]}
        for i in range(6)
    ),
    *(
        {"id": f"small-{i}", "input": f"small {i}", "label": "neg", "choices": ["pos", "neg"]}
        for i in range(5)
    ),
]


async def _listed(stub: Any, run_id: str, page_size: int) -> tuple[list[Any], list[int]]:
    rows: list[Any] = []
    sizes: list[int] = []
    token = ""
    for _ in range(100):
        page = await stub.ListSamples(
            service_pb2.ListSamplesRequest(run_id=run_id, page_size=page_size, page_token=token)
        )
        rows += page.samples
        sizes.append(page.ByteSize())
        token = page.next_page_token
        if not token:
            return rows, sizes
    raise AssertionError("ListSamples did not end within 100 pages")


async def test_pages_stay_under_the_message_limit_and_cut_only_what_cannot_fit(
    tmp_path: Path,
) -> None:
    async with FakeProvider(answer=_answer) as fake:
        model = {
            "id": "fake",
            "provider": "openai",
            "base_url": fake.base_url,
            "max_answer_bytes": 2 * HUGE,
        }
        data = config_data(tmp_path, models=[model], limits={"max_message_bytes": LIMIT})
        async with running_server(parse_config(data)) as address:
            async with AsyncEvaldClient(address) as client:
                await client.upload_dataset(
                    name="d", version="1.0.0", task_type="classification", records=RECORDS
                )
                run = await client.create_run(
                    models=["fake"],
                    datasets=[("d", "1.0.0")],
                    retry_policy=RetryPolicy(max_retries=0),
                )
                with anyio.fail_after(60):
                    await client.wait(run.run_id)
                typed = [s async for s in client.samples(run.run_id)]
            async with grpc.aio.insecure_channel(address) as channel:
                stub: Any = service_pb2_grpc.EvaluationServiceStub(channel)  # type: ignore[no-untyped-call]
                for page_size in (0, 1, 1000):
                    rows, sizes = await _listed(stub, run.run_id, page_size)
                    assert max(sizes) < LIMIT
                    assert [r.record_id for r in rows] == [r["id"] for r in RECORDS]
    by_id = {r.record_id: r for r in rows}
    huge = by_id["huge"]
    [cut] = huge.truncated_fields
    assert (cut.field, cut.full_bytes) == ("output", HUGE)
    assert 0 < len(huge.output.encode()) < LIMIT
    assert set(huge.output) == {"é"}  # cut between characters, not inside one
    for i in range(6):
        large = by_id[f"large-{i}"]
        assert large.output == "x" * LARGE  # whole: it fits a message, only not six at once
        assert not large.truncated_fields
    # The SDK reads the flag too.
    sdk_huge = next(s for s in typed if s.record_id == "huge")
    assert dict(sdk_huge.truncated_fields) == {"output": HUGE}
    assert len(typed) == len(RECORDS)
