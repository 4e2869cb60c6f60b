"""The order of work, as docs/execution.md ("Order of work") states it, against the fake
provider on loopback:

* within a run, one model works through the run's datasets in spec order; the next
  dataset's work is pulled once fewer than 2 × workers subtasks of the current one
  remain (no idle gap, and earlier scored results than round-robin would give);
* across runs, fairness: two runs on the same models, each under a run limit below
  the model limits, progress together, and each run's limit holds across models.
"""

import itertools
from pathlib import Path

import anyio
import pytest

from evald_server.app import DatasetRef, Evald, RunSpec
from evald_server.domain import RunState
from evald_server.fake_provider import Behaviour, FakeConfig, FakeProvider, JournalEntry
from tests.engine._support import TENANT, InlineScoring, make_config, upload, wait_until_finished


def _started(entries: list[JournalEntry]) -> list[JournalEntry]:
    return sorted((e for e in entries if e.key), key=lambda e: e.started_at)


SLOW_MS = 3000.0


@pytest.mark.anyio
async def test_a_run_works_through_its_datasets_in_order_with_overlap(tmp_path: Path) -> None:
    workers = 2
    # Each dataset's last record is slow: a worker that finishes the record before it
    # has the whole of that call to start the next dataset's work, however loaded the
    # machine (a 50 ms bound on the gap was once missed at load 17).
    slow_last = {"review number 29": Behaviour.ok(latency_ms=SLOW_MS)}
    async with FakeProvider(FakeConfig(latency_ms=5, per_prompt=slow_last)) as fake:
        config = make_config(tmp_path, [fake.model_config("m", max_concurrency=workers)])
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "first", 30)
            await upload(app, "second", 30)
            spec = RunSpec(
                models=("m",),
                datasets=(DatasetRef("first", "1.0.0"), DatasetRef("second", "1.0.0")),
            )
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id)
            done = await app.runs.get(TENANT, run.run_id)
            tasks = {t.dataset_name: t.task_id for t in done.progress.tasks}
        entries = _started(fake.journal.entries)
        order = [e.key.rsplit(".", 2)[0] for e in entries if e.key]
        first, second = tasks["first"], tasks["second"]
        assert len(order) == 60
        # Dataset by dataset: every call of the first starts before any of the second...
        assert order == [first] * 30 + [second] * 30, order
        # ...and its work is already claimed: it starts as soon as a worker is free, while
        # the first dataset's slow last call still runs, not once that task is done.
        last_of_first = max(e.finished_at or 0.0 for e in entries if e.key.startswith(first))
        first_of_second = min(e.started_at for e in entries if e.key.startswith(second))
        assert first_of_second < last_of_first, "the second dataset waited for the first"


@pytest.mark.anyio
async def test_two_limited_runs_over_two_models_progress_together(tmp_path: Path) -> None:
    async with FakeProvider(FakeConfig(latency_ms=10)) as fake:
        models = [fake.model_config(m, max_concurrency=3) for m in ("a", "b")]
        config = make_config(tmp_path, models, max_inflight=16)
        async with Evald.open(config, scoring=InlineScoring()) as app:
            await upload(app, "d", 30)
            spec = RunSpec(
                models=("a", "b"), datasets=(DatasetRef("d", "1.0.0"),), max_concurrency=2
            )
            with anyio.fail_after(60):
                runs = [await app.runs.create(TENANT, spec) for _ in range(2)]
                for run in runs:
                    await wait_until_finished(app, run.run_id)
            for run in runs:
                assert (await app.runs.get(TENANT, run.run_id)).state is RunState.SUCCEEDED
        entries = _started(fake.journal.entries)
        by_run = {r.run_id: [e for e in entries if e.key.startswith(r.run_id)] for r in runs}
        for calls in by_run.values():
            assert len(calls) == 60
            assert {c.model for c in calls} == {"a", "b"}, "both models serve each run"
            # The run limit holds across the run's models: never 3 calls at once.
            assert _peak([(c.started_at, c.finished_at or c.started_at) for c in calls]) <= 2
        one, other = (by_run[r.run_id] for r in runs)
        last_of_one = max(c.started_at for c in one)
        share = sum(1 for c in other if c.started_at < last_of_one) / len(other)
        assert share >= 0.3, f"only {share:.0%} of the other run started before the first ended"


def _peak(spans: list[tuple[float, float]]) -> int:
    marks = sorted(itertools.chain(((s, 1) for s, _ in spans), ((f, -1) for _, f in spans)))
    level = peak = 0
    for _, step in marks:
        level += step
        peak = max(peak, level)
    return peak
