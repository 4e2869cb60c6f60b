"""Incremental scoring in the engine: a task is scored page by page in the scoring
workers as its outcomes commit, and its stored result and per-sample scores are those
the whole-task path computes from the store; when a page was scored against labels
that the task's final set differs from, the task is scored whole instead. A scored
page's per-sample scores are stored while the task's inference goes on, and a task
that ends without a report keeps none of them."""

import dataclasses
import json
import re
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import anyio
import pytest

from evald_server.app import DatasetHeader, DatasetRef, Evald, RunSpec
from evald_server.domain import ErrorReason, ResultStatus, RunState, TaskState, TaskType
from evald_server.engine import TaskEvaluation
from evald_server.engine._task_scoring import StoredSamples
from evald_server.fake_provider import FakeChatRequest, FakeProvider
from evald_server.scoring import ScoreReport, ScoringPool
from tests._shared import classification_jsonl, simulated_model
from tests.engine._page_scorers import FailingAtTheEnd
from tests.engine._support import TENANT, make_config, wait_until_finished
from tests.scoring._pool_scorers import ClassificationBreakingOnBoom

pytestmark = pytest.mark.anyio
RESAMPLES = 200
PAGE = 64


def _jsonl(records: int, *, late_label: bool) -> bytes:
    """No choices: the label set is the gold labels (the last record's may be new)."""
    lines = []
    for i in range(records):
        label = "odd" if late_label and i == records - 1 else ("pos" if i % 3 else "neg")
        lines.append(json.dumps({"id": f"r{i}", "input": f"review {i}", "label": label}))
    return ("\n".join(lines) + "\n").encode()


Outcome = tuple[ScoreReport, ScoreReport, dict[str, dict[str, float] | None], int, int]


def _qa_jsonl(records: int) -> bytes:
    lines = [
        json.dumps({"id": f"q{i}", "question": f"what is {i}?", "answers": [f"it is {i}", str(i)]})
        for i in range(records)
    ]
    return ("\n".join(lines) + "\n").encode()


async def _scored_run(
    tmp_path: Path, *, late_label: bool, task_type: TaskType = TaskType.CLASSIFICATION
) -> Outcome:
    """The stored report, the whole-task report, the stored scores, pages, fallbacks."""
    config = make_config(
        tmp_path,
        [simulated_model("sim", latency_ms=10, max_concurrency=8, accuracy=0.7)],
        engine={"score_page_size": PAGE},
    )
    pool = ScoringPool(1, resamples=RESAMPLES)
    try:
        # A worker already started, as in a long-lived server: pages go out while the
        # run's inference goes on.
        await pool.score(task_type, [], seed=0, timeout_s=120)
        async with Evald.open(config, scoring=pool) as app:
            header = DatasetHeader("d", "1.0.0", task_type)
            data = (
                _qa_jsonl(300) if task_type is TaskType.QA else _jsonl(300, late_label=late_label)
            )
            await app.datasets.upload(TENANT, header, [data])
            spec = RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),), repeat=2)
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id)
            store = app.engine.store
            (task,) = await store.get_tasks(run.run_id)
            ((_, stored),) = await store.read_results(run.run_id)
            kept = TaskEvaluation.from_json(stored).report
            assert kept is not None
            whole = await pool.score(
                task_type,
                StoredSamples(store, task.task_id),
                seed=spec.seed,
                timeout_s=60,
            )
            rows = await store.run_subtasks(run.run_id, task.task_id, (), 0, 1000)
            scores = {str(r.row_id): r.scores for r in rows}
            pages = app.engine.pages
            assert pages is not None
            return kept, whole, scores, pages.pages_scored, pages.fallbacks
    finally:
        pool.close()


async def test_a_task_scored_page_by_page_keeps_the_whole_task_result(tmp_path: Path) -> None:
    kept, whole, scores, pages_scored, fallbacks = await _scored_run(tmp_path, late_label=False)
    assert pages_scored >= 1  # the rest is scored as one last page with the aggregation
    assert fallbacks == 0
    assert kept == dataclasses.replace(whole, sample_scores=[], correctness=None)
    assert scores == {s.subtask_id: s.scores for s in whole.sample_scores}


async def test_a_qa_task_is_scored_page_by_page_too(tmp_path: Path) -> None:
    """Any scorer whose samples score on their own (QA here) pages as classification does."""
    kept, whole, scores, pages_scored, fallbacks = await _scored_run(
        tmp_path, late_label=False, task_type=TaskType.QA
    )
    assert pages_scored >= 1
    assert fallbacks == 0
    assert kept == dataclasses.replace(whole, sample_scores=[], correctness=None)
    assert scores == {s.subtask_id: s.scores for s in whole.sample_scores}


async def test_a_label_seen_only_at_the_end_scores_the_task_whole(tmp_path: Path) -> None:
    kept, whole, scores, pages_scored, fallbacks = await _scored_run(tmp_path, late_label=True)
    assert pages_scored > 0
    assert fallbacks == 1
    assert "odd" in kept.payload.labels  # type: ignore[union-attr]
    assert kept == dataclasses.replace(whole, sample_scores=[], correctness=None)
    assert scores == {s.subtask_id: s.scores for s in whole.sample_scores}


def _app(
    tmp_path: Path, pool: ScoringPool, latency_ms: float
) -> AbstractAsyncContextManager[Evald]:
    config = make_config(
        tmp_path,
        [simulated_model("sim", latency_ms=latency_ms, max_concurrency=8, accuracy=0.7)],
        engine={"score_page_size": PAGE},
    )
    return Evald.open(config, scoring=pool)


async def test_a_scored_pages_scores_are_stored_while_its_task_runs(tmp_path: Path) -> None:
    pool = ScoringPool(1, resamples=RESAMPLES)
    try:
        await pool.score(TaskType.CLASSIFICATION, [], seed=0, timeout_s=120)  # a warm worker
        async with _app(tmp_path, pool, latency_ms=20) as app:
            header = DatasetHeader("d", "1.0.0", TaskType.CLASSIFICATION)
            await app.datasets.upload(TENANT, header, [_jsonl(400, late_label=False)])
            spec = RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),))
            run = await app.runs.create(TENANT, spec)
            store = app.engine.store
            seen_while_running = 0
            with anyio.fail_after(60):
                while True:
                    (task,) = await store.get_tasks(run.run_id)
                    if task.state not in (TaskState.PENDING, TaskState.RUNNING):
                        break
                    rows = await store.run_subtasks(run.run_id, task.task_id, (), 0, 1000)
                    seen_while_running = sum(r.scores is not None for r in rows)
                    if seen_while_running:
                        break
                    await anyio.sleep(0.01)
            assert seen_while_running >= PAGE  # a whole page, before the last answer
            await wait_until_finished(app, run.run_id)
            (task,) = await store.get_tasks(run.run_id)
            rows = await store.run_subtasks(run.run_id, task.task_id, (), 0, 1000)
            assert all(r.scores is not None for r in rows)
    finally:
        pool.close()


async def test_a_task_ending_without_a_report_keeps_no_sample_score(tmp_path: Path) -> None:
    pool = ScoringPool(1, scorers={TaskType.CLASSIFICATION: FailingAtTheEnd()})
    try:
        async with _app(tmp_path, pool, latency_ms=5) as app:
            header = DatasetHeader("d", "1.0.0", TaskType.CLASSIFICATION)
            await app.datasets.upload(TENANT, header, [_jsonl(300, late_label=False)])
            spec = RunSpec(models=("sim",), datasets=(DatasetRef("d", "1.0.0"),))
            run = await app.runs.create(TENANT, spec)
            await wait_until_finished(app, run.run_id)
            store = app.engine.store
            (task,) = await store.get_tasks(run.run_id)
            rows = await store.run_subtasks(run.run_id, task.task_id, (), 0, 1000)
            pages = app.engine.pages
            assert pages is not None
            assert pages.pages_scored >= 1  # pages were scored and their scores stored
            assert task.state is TaskState.FAILED
            assert [r.row_id for r in rows if r.scores is not None or r.correct is not None] == []
    finally:
        pool.close()


@pytest.mark.parametrize("page_size", [4, 2000])
async def test_a_sample_its_scorer_raises_on_is_left_out_and_the_task_is_partial(
    tmp_path: Path, page_size: int
) -> None:
    """One answer the scorer cannot read: flagged unscorable and named in the task's
    errors, every other sample scored, the task partial, and the engine goes on; whether
    the task is scored in many pages or in its last one and the aggregation."""

    def answer(chat: FakeChatRequest) -> str:
        return "BOOM" if re.search(r"review number 3\b", chat.last_content) else "pos"

    pool = ScoringPool(1, scorers={TaskType.CLASSIFICATION: ClassificationBreakingOnBoom()})
    try:
        async with FakeProvider(answer=answer) as fake:
            config = make_config(
                tmp_path, [fake.model_config("m1")], engine={"score_page_size": page_size}
            )
            async with Evald.open(config, scoring=pool) as app:
                header = DatasetHeader("d", "1.0.0", TaskType.CLASSIFICATION)
                await app.datasets.upload(TENANT, header, [classification_jsonl(12)])
                spec = RunSpec(models=("m1",), datasets=(DatasetRef("d", "1.0.0"),))
                runs = []
                for _ in range(2):  # the second run: the engine still serves
                    run = await app.runs.create(TENANT, spec)
                    await wait_until_finished(app, run.run_id)
                    runs.append(run.run_id)
                (result,) = (await app.runs.results(TENANT, runs[0])).items
                (task,) = await app.engine.store.get_tasks(runs[0])
                samples = (await app.runs.samples(TENANT, runs[0], page_size=100)).items
                second = await app.runs.get(TENANT, runs[1])
    finally:
        pool.close()
    assert task.state is TaskState.PARTIAL
    assert result.status is ResultStatus.PARTIAL_SUCCESS
    (error,) = [e for e in result.errors if e.reason is ErrorReason.SCORER_FAILED]
    assert "raised on 1 sample(s) alone (records r3;" in error.message
    assert "cannot read the answer of r3" in error.message
    report = result.report
    assert report is not None
    assert report.scored_samples == 11
    assert report.metrics["accuracy"] == pytest.approx(5 / 11)  # "pos" right for r1, r5, ...
    flagged = {s.record_id: s.flags for s in samples}
    assert flagged["r3"] == ("unscorable",)
    assert all(s.scores for s in samples if s.record_id != "r3")
    assert second.state is RunState.PARTIAL
