"""A fault-injecting, OpenAI-compatible fake model provider for tests and benchmarks.

In process::

    async with FakeProvider(FakeConfig(latency_ms=50)) as fake:
        fake.script_key("sub-1", Behaviour.error(503), Behaviour.error(503))
        model = fake.model_config("m1", max_concurrency=8)
        ...
        assert fake.journal.peak_concurrency("m1") <= 8

As its own process: ``python -m evald_server.fake_provider --port 0 --latency-ms 50``
(the first stdout line is the URL), driven with ``FakeProcess`` / ``FakeControl``.
"""

from evald_server.fake_provider._behaviour import Behaviour, FakeConfig, FaultRate, Kind
from evald_server.fake_provider._completions import (
    EchoLogprobFn,
    EchoMode,
    hashed_logprob,
    tokenize,
)
from evald_server.fake_provider._journal import JournalEntry
from evald_server.fake_provider._quota import Quota
from evald_server.fake_provider._remote import FakeControl, FakeProcess
from evald_server.fake_provider._server import FakeChatRequest, FakeProvider

__all__ = [
    "Behaviour",
    "EchoLogprobFn",
    "EchoMode",
    "FakeChatRequest",
    "FakeConfig",
    "FakeControl",
    "FakeProcess",
    "FakeProvider",
    "FaultRate",
    "JournalEntry",
    "Kind",
    "Quota",
    "hashed_logprob",
    "tokenize",
]
