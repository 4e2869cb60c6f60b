"""Property test: provider answers with extreme and malformed values in every field,
streamed and not, through the real server (a child process) and the fake provider (a
child process scripted through its control API).

Each example scripts the answers of one run (two models, one streamed; a
classification and a multiple-choice dataset scored by log-probabilities): usage,
logprobs, finish_reason, content, rate-limit headers and Retry-After drawn from values
no provider should send (2^63, 10^30, -1, NaN, Infinity, lone surrogates, "99999999h",
wrong JSON types), mixed with error statuses, malformed bodies and cut streams. Then:

* the server process never exits and logs no traceback;
* every sample ends in a graded state (succeeded, or failed permanently with a graded
  provider error), never INTERNAL_ERROR; no RPC answers INTERNAL (the SDK would raise);
* every stored and reported number is within its bound: tokens within the model's
  ``context_tokens``, latencies finite and ordered, flags from the known set, metrics
  in [0, 1], the execution profile finite and non-negative.

``make test`` runs ``EXAMPLES`` examples (about ten answers each) on one server and one
fake for the whole module; the ``slow`` variant runs ``SLOW_EXAMPLES``. The retry
policy, the Retry-After cap and the models' ``rate_limit_reset_cap_s`` are short, so
that an example's answers decide how it ends, not the clock.
"""

import dataclasses
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evald_client import (
    ChoiceScoring,
    EvaldClient,
    GenerationParams,
    RetryPolicy,
    RunState,
    SubtaskState,
)
from evald_server.domain import ErrorReason
from evald_server.fake_provider import Behaviour, FakeProcess
from evald_server.fake_provider._behaviour import Kind
from tests.harness import ServerProcess
from tests.reliability._support import fake_model, release, server_config

EXAMPLES = 60
SLOW_EXAMPLES = 600
CONTEXT_TOKENS = 100_000
ANSWERS = 10  # scripted answers per example: a run's 8 calls and some of their retries
KNOWN_FLAGS = {
    "usage_invalid",
    "logprobs_invalid",
    "text_repaired",
    "unmapped",
    "unmapped_output",
    "logprob_fallback",
    "unscorable",
}
# A provider's failures, graded by its own reasons (never INTERNAL_ERROR).
GRADED_FAILURES = {reason.name for reason in ErrorReason if reason.name.startswith("PROVIDER_")}

# -- what a provider may send -------------------------------------------------------------

EXTREME_NUMBERS = st.one_of(
    st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, 10**30, -(10**30)]),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)
ANY_NUMBER = st.one_of(EXTREME_NUMBERS, JUNK)
# Any text, with lone surrogates and NUL often enough to matter.
_ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=20)
TEXT = st.one_of(
    _ANY_TEXT,
    st.builds(
        lambda a, odd, b: a + odd + b,
        _ANY_TEXT,
        st.sampled_from(["\ud800", "\udfff", "\x00"]),
        _ANY_TEXT,
    ),
)

USAGE = st.one_of(
    JUNK,
    st.fixed_dictionaries(
        {},
        optional={
            "prompt_tokens": ANY_NUMBER,
            "completion_tokens": ANY_NUMBER,
            "total_tokens": ANY_NUMBER,
        },
    ),
)
ALTERNATIVE = st.fixed_dictionaries(
    {}, optional={"token": st.one_of(TEXT, JUNK), "logprob": ANY_NUMBER}
)
LOGPROBS = st.one_of(
    JUNK,
    st.fixed_dictionaries(
        {},
        optional={
            "content": st.one_of(
                JUNK,
                st.lists(
                    st.one_of(
                        JUNK,
                        st.fixed_dictionaries(
                            {},
                            optional={
                                "token": st.one_of(TEXT, JUNK),
                                "logprob": ANY_NUMBER,
                                "top_logprobs": st.one_of(JUNK, st.lists(ALTERNATIVE, max_size=25)),
                            },
                        ),
                    ),
                    max_size=2,
                ),
            )
        },
    ),
)
FINISH_REASON = st.one_of(
    st.sampled_from(["stop", "length", "content_filter", "tool_calls", "function_call", ""]),
    TEXT,
    JUNK,
)
CONTENT = st.one_of(st.sampled_from(["pos", "neg", "A", "B", " C", ""]), TEXT, JUNK)

_HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)
HEADER_VALUE = st.one_of(
    EXTREME_NUMBERS.map(str),
    st.sampled_from(["1e9", "99999999h", "1e400", "-5s", "1h2", "nan", "inf", "-inf", "0.001"]),
    st.sampled_from(["6m0s", "1.5s", "20ms", "0", "1"]),
    _HEADER_TEXT,
).map(lambda value: value.strip() or "0")  # a header value cannot be blank
HEADER_NAMES = [
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "ratelimit-limit",
    "ratelimit-remaining",
    "ratelimit-reset",
    "retry-after",
    "retry-after-ms",
]
HEADERS = st.dictionaries(st.sampled_from(HEADER_NAMES), HEADER_VALUE, max_size=5)


def _scripted(fields: dict[str, Any], headers: dict[str, str]) -> Behaviour:
    return Behaviour.scripted(headers=headers, **fields)


SCRIPTED = st.builds(
    _scripted,
    st.fixed_dictionaries(
        {},
        optional={
            "content": CONTENT,
            "finish_reason": FINISH_REASON,
            "logprobs": LOGPROBS,
            "usage": USAGE,
        },
    ),
    HEADERS,
)
ERROR = st.builds(
    lambda status, headers: Behaviour.error(status, headers=headers),
    st.sampled_from([400, 404, 408, 409, 422, 429, 500, 502, 503]),
    HEADERS,
)
ANSWER = st.one_of(
    SCRIPTED,
    SCRIPTED,
    SCRIPTED,
    ERROR,
    st.just(Behaviour.malformed()),
    st.builds(lambda n: Behaviour.interrupted(after_chunks=n), st.integers(0, 3)),
)

# -- one server and one fake for the module -----------------------------------------------

RECORDS_CLS = [
    {"id": f"c{i}", "input": f"review {i}", "label": "pos", "choices": ["pos", "neg"]}
    for i in range(2)
]
RECORDS_MC = [
    {
        "id": f"m{i}",
        "question": f"question {i}?",
        "choices": ["w", "x", "y", "z"],
        "answer_index": i,
    }
    for i in range(2)
]


@dataclass
class Rig:
    portal: BlockingPortal
    fake: FakeProcess
    server: ServerProcess
    client: EvaldClient

    def script(self, answers: list[Behaviour]) -> None:
        control = self.fake.control
        self.portal.call(control.reset)
        # Through JSON as any remote config: NaN, Infinity, 10^30 and "\ud800" survive it.
        sequence = json.loads(json.dumps([a.to_json() for a in answers]))
        self.portal.call(lambda: control.configure(sequence=sequence))


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp_path: Path = tmp_path_factory.mktemp("answers")
    with start_blocking_portal() as portal:
        fake = FakeProcess("--port", "0")
        url = portal.call(fake.start)
        bounds = {
            "context_tokens": CONTEXT_TOKENS,
            "rate_limit_reset_cap_s": 0.05,
            "timeout_s": 10.0,
            "max_concurrency": 4,
            # Declared budgets: a stated limit then only shortens a hold (capped above),
            # where one learned at the floor (1 request a minute) would pace every later
            # example by the minute. Learning is pinned by the rate-control tests.
            "requests_per_minute": 1e6,
            "tokens_per_minute": 1e9,
        }
        config = server_config(
            tmp_path,
            [
                fake_model(url, "plain", **bounds),
                fake_model(url, "streamed", stream=True, **bounds),
            ],
        )
        server = ServerProcess(config)
        try:
            address = server.start()
            with EvaldClient(address) as client:
                client.upload_dataset(
                    name="cls", version="1.0.0", task_type="classification", records=RECORDS_CLS
                )
                client.upload_dataset(
                    name="mc", version="1.0.0", task_type="multiple_choice", records=RECORDS_MC
                )
                yield Rig(portal, fake, server, client)
        finally:
            server.kill()
            release(server)
            portal.call(fake.stop)
    assert "Traceback" not in server.stderr(), server.stderr()


_RETRIES = RetryPolicy(
    max_retries=1, backoff_s=(0.01,), jitter_fraction=0.0, retry_after_cap_s=0.05
)


def _check_run(rig: Rig, answers: list[Behaviour]) -> None:
    rig.script(answers)
    client = rig.client
    run = client.create_run(
        models=["plain", "streamed"],
        datasets=[("cls", "1.0.0"), ("mc", "1.0.0")],
        retry_policy=_RETRIES,
        choice_scoring=ChoiceScoring.LOGPROBS,
        generation=GenerationParams(max_tokens=8),
    )
    run = client.wait(run.run_id, timeout_s=120)
    assert rig.server.process is not None
    assert rig.server.process.poll() is None, rig.server.stderr()
    assert run.state in (RunState.SUCCEEDED, RunState.PARTIAL, RunState.FAILED)
    samples = list(client.samples(run.run_id))
    assert len(samples) == 8
    for sample in samples:
        _check_sample(sample)
    for result in client.results(run.run_id):
        _check_result(result)
    # The run did meet the scripted answers: one call per sample, and the retries.
    calls = rig.portal.call(rig.fake.control.journal)
    assert len(calls) >= len(samples)
    assert sum(s.attempts for s in samples) == len(calls)


def _check_sample(sample: Any) -> None:
    assert sample.state in (SubtaskState.SUCCEEDED, SubtaskState.FAILED_PERMANENT), sample
    if sample.state is SubtaskState.FAILED_PERMANENT:
        assert sample.last_error is not None
        assert sample.last_error.reason in GRADED_FAILURES, sample.last_error
        return
    counts = [c for c in (sample.prompt_tokens, sample.completion_tokens) if c is not None]
    assert all(0 <= c <= CONTEXT_TOKENS for c in counts), sample
    assert sum(counts) <= CONTEXT_TOKENS, sample
    assert sample.latency_ms is not None
    assert math.isfinite(sample.latency_ms)
    assert sample.latency_ms >= 0
    if sample.ttft_ms is not None:
        assert 0 <= sample.ttft_ms <= sample.latency_ms
    if sample.decode_tokens_per_second is not None:
        assert math.isfinite(sample.decode_tokens_per_second)
        assert sample.decode_tokens_per_second >= 0
    assert set(sample.flags) <= KNOWN_FLAGS, sample.flags
    assert all(math.isfinite(v) for v in sample.scores.values()), sample.scores
    assert not any(0xD800 <= ord(c) <= 0xDFFF for c in sample.output), sample.output


def _check_result(result: Any) -> None:
    for name, value in result.metrics.items():
        assert math.isfinite(value), (name, value)
        if not name.endswith("_ms"):
            assert 0.0 <= value <= 1.0, (name, value)
    execution = result.execution
    for name in ("prompt_tokens", "completion_tokens"):
        value = getattr(execution, name)
        assert value is None or 0 <= value <= 8 * CONTEXT_TOKENS, (name, value)
    for field in dataclasses.fields(execution):
        value = getattr(execution, field.name)
        if isinstance(value, float):
            assert math.isfinite(value), (field.name, value)
            assert value >= 0, (field.name, value)


_FIXTURE = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]


@pytest.mark.timeout(600)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=_FIXTURE)
@given(answers=st.lists(ANSWER, min_size=ANSWERS, max_size=ANSWERS))
def test_hostile_provider_answers_never_crash_the_server_nor_leave_bounds(
    rig: Rig, answers: list[Behaviour]
) -> None:
    _check_run(rig, answers)


@pytest.mark.slow
@pytest.mark.timeout(3600)
@settings(max_examples=SLOW_EXAMPLES, deadline=None, suppress_health_check=_FIXTURE)
@given(answers=st.lists(ANSWER, min_size=ANSWERS, max_size=ANSWERS))
def test_many_more_hostile_provider_answers(rig: Rig, answers: list[Behaviour]) -> None:
    _check_run(rig, answers)


def test_the_scripted_answers_reach_the_client_as_drawn(rig: Rig) -> None:
    """The control for the property: a scripted 10^30 usage does reach evald (and is
    flagged), so the examples test what they draw."""
    huge = Behaviour.scripted(
        content="pos", usage={"prompt_tokens": 10**30, "completion_tokens": 1}
    )
    rig.script([huge] * 8)
    run = rig.client.create_run(models=["plain"], datasets=[("cls", "1.0.0")])
    run = rig.client.wait(run.run_id, timeout_s=60)
    flags = [s.flags for s in rig.client.samples(run.run_id)]
    assert flags == [("usage_invalid",)] * 2
    entries = rig.portal.call(rig.fake.control.journal)
    assert [e.outcome for e in entries] == [Kind.SCRIPTED.value] * 2
