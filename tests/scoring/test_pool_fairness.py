"""One slow task cannot stall the others: the long lane, and RE2 for dataset regexes.

Before, a generation record with reference ``^(a|a)+$`` and an answer of 34 ``a``s
and a ``!`` held the only scoring worker (Python's re backtracks exponentially) and
another tenant's 2-record task waited behind it for as long as the 600 s budget.
"""

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from evald_server.datasets import InvalidRegex, compile_regex, parse_jsonl
from evald_server.domain import DatasetInvalid, TaskType
from evald_server.scoring import ScoringFailure, ScoringPool, score_task
from tests._shared import wait_for
from tests.scoring._factories import samples_of
from tests.scoring._pool_scorers import SleepingScorer
from tests.scoring.test_intervals import BUILDERS

EVIL = "^(a|a)+$"
ANSWER = "a" * 34 + "!"


@pytest.fixture
def pool() -> Iterator[ScoringPool]:
    # One shared slot, as on a 2-core machine; a job is "long" after 0.5 s.
    scoring_pool = ScoringPool(
        1, scorers={TaskType.SUMMARIZATION: SleepingScorer()}, long_after_s=0.5
    )
    yield scoring_pool
    scoring_pool.close()


@pytest.mark.anyio
async def test_a_quick_task_is_scored_while_a_slow_one_holds_the_only_slot(
    pool: ScoringPool, tmp_path: Path
) -> None:
    slow = samples_of([({"document": "d", "summary": "s", "pid_file": str(tmp_path / "pid")}, "x")])
    quick = BUILDERS[TaskType.CLASSIFICATION](random.Random(3), 2)
    finished: dict[str, float] = {}
    started = time.monotonic()

    async def score_slow() -> None:
        with pytest.raises(ScoringFailure):
            await pool.score(TaskType.SUMMARIZATION, slow, seed=0, timeout_s=20)
        finished["slow"] = time.monotonic() - started

    async def score_quick() -> None:
        await anyio.sleep(0.2)  # the slow job has the shared slot
        report = await pool.score(TaskType.CLASSIFICATION, quick, seed=1, timeout_s=20)
        assert report == score_task(TaskType.CLASSIFICATION, quick, seed=1)
        finished["quick"] = time.monotonic() - started
        assert pool.lane_stats() == (0, 1)  # the slow job is in the long lane
        tg.cancel_scope.cancel()  # enough: the slow one is killed with its scope

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(score_slow)
            tg.start_soon(score_quick)
    assert "slow" not in finished  # still running (then cancelled) when quick was done
    assert "quick" in finished


@pytest.mark.anyio
async def test_the_long_lane_is_bounded_too(pool: ScoringPool, tmp_path: Path) -> None:
    def sleeper(name: str) -> list[object]:
        record = {"document": "d", "summary": "s", "pid_file": str(tmp_path / name)}
        return list(samples_of([(record, "x")]))

    async def slow(name: str) -> None:
        await pool.score(TaskType.SUMMARIZATION, sleeper(name), seed=0, timeout_s=60)  # type: ignore[arg-type]

    async def one_long_one_shared() -> bool:
        # One long, one shared (waiting for the full long lane), one waiting.
        return pool.lane_stats() == (1, 1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow, "a")
        tg.start_soon(slow, "b")
        tg.start_soon(slow, "c")
        await wait_for(one_long_one_shared, timeout_s=45)
        await anyio.sleep(0.5)  # and it stays so: no third job gets a slot
        assert pool.lane_stats() == (1, 1)
        tg.cancel_scope.cancel()  # the sleepers are killed with their scope


def test_the_evil_regex_is_linear_under_re2() -> None:
    samples = samples_of([({"input": "q", "reference": EVIL, "match": "regex"}, ANSWER)] * 50)
    started = time.perf_counter()
    report = score_task(TaskType.GENERATION, samples)
    assert time.perf_counter() - started < 5  # Python's re: minutes per sample
    assert report.metrics["accuracy"] == 0.0


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(a)\1", "invalid escape sequence"),
        (r"foo(?=bar)", "invalid perl operator"),
        (r"(?<!x)y", "invalid perl operator"),
        ("[", "missing ]"),
    ],
)
def test_patterns_re2_cannot_run_are_refused_at_upload_naming_the_line(
    pattern: str, says: str
) -> None:
    with pytest.raises(InvalidRegex, match=says):
        compile_regex(pattern)
    good = {"id": "ok", "input": "q", "reference": "a+", "match": "regex"}
    bad = {"id": "bad", "input": "q", "reference": pattern, "match": "regex"}
    body = "\n".join(json.dumps(r) for r in (good, bad)).encode()
    with pytest.raises(DatasetInvalid) as caught:
        parse_jsonl(TaskType.GENERATION, [body], max_records=10, max_record_bytes=10_000)
    assert caught.value.metadata["line"] == "2"
    assert "RE2 cannot compile it" in caught.value.message
    assert says in caught.value.message
