"""The fake provider as its own process: prints its URL, serves, stops on SIGTERM."""

import subprocess
import sys

import anyio
import pytest

from evald_server.config import ModelConfig
from evald_server.domain import ErrorReason
from evald_server.fake_provider import FakeProcess
from evald_server.providers import ProviderFailure, build_provider

from .conftest import make_request

pytestmark = pytest.mark.anyio


async def test_subprocess_serves_is_driven_and_stops_on_sigterm() -> None:
    fake = FakeProcess("--port", "0", "--latency-ms", "1", "--fault", "503=0.0")
    url = await fake.start()
    try:
        assert url.startswith("http://127.0.0.1:")
        await fake.control.configure(per_key={"K": [{"kind": "status", "status": 503}]})
        model = ModelConfig(id="m1", provider="openai", base_url=url, timeout_s=10.0)
        provider = build_provider(model)
        try:
            with pytest.raises(ProviderFailure) as caught:
                await provider.complete(make_request("K"))
            assert caught.value.reason is ErrorReason.PROVIDER_HTTP_5XX
            assert (await provider.complete(make_request("K"))).text
        finally:
            await provider.aclose()
        entries = await fake.control.journal()
        assert [(e.key, e.outcome) for e in entries] == [("K", "http_503"), ("K", "ok")]
        stats = await fake.control.stats()
        assert stats["requests"] == 2
        assert stats["peak_concurrency"] == {"m1": 1}
    finally:
        code = await fake.stop(timeout_s=10.0)
    assert code == 0  # it exited by itself on SIGTERM, not by SIGKILL


async def test_bad_arguments_exit_with_a_message() -> None:
    result = await anyio.run_process(
        [sys.executable, "-m", "evald_server.fake_provider", "--fault", "teapot=0.5"],
        check=False,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert result.returncode != 0
    assert b"KIND must be one of" in result.stderr
    assert result.stdout == b""
