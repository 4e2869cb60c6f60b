"""Replicas of evald on one PostgreSQL database, as real server processes.

Two replicas share a run; a watch on the replica that did not create it sees every
event once, in order, to the end; the fake's peak concurrency per model never exceeds
the model's limit. A cancel on a replica that runs none of the work aborts the calls
of the one that does. One request id sent to two replicas creates one run. Three
replicas finish a run of 5,000 subtasks over two models while one dies mid-inference
and another mid-scoring.
"""

import json
import time
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest

from evald_client import AsyncEvaldClient, JudgeOptions, StateChanged
from tests._postgres import pg_url
from tests._shared import classification_records, wait_for
from tests.reliability._cluster import Cluster, cluster
from tests.reliability._rig import Crash, assert_no_finished_work_repeated

__all__ = ["pg_url"]

pytestmark = pytest.mark.anyio

RUN_LIMIT = 7  # under the models' 6 + 3


async def test_two_replicas_share_a_run_and_a_watch_on_either_sees_all_of_it(
    tmp_path: Path, pg_url: str
) -> None:
    async with cluster(tmp_path, pg_url, models=[("fa", 4), ("fb", 3)]) as nodes:
        await nodes.start("r1")
        await nodes.start("r2")
        run = await nodes.start_run("r1", 150, ["fa", "fb"])
        seqs: list[int] = []
        last = None
        async with nodes.client("r2") as watcher:
            with anyio.fail_after(120):
                async for event in watcher.watch(run.run_id):
                    seqs.append(event.seq)
                    last = event
        assert seqs == list(range(1, len(seqs) + 1)), "no gap, no duplicate"
        assert isinstance(last, StateChanged)
        assert last.state.value == "succeeded"
        await nodes.assert_complete(run.run_id, 300)
        stats = await nodes.fake.control.stats()
        assert stats["peak_concurrency"]["fa"] <= 4
        assert stats["peak_concurrency"]["fb"] <= 3
        # Both replicas took part: each holds a membership row and claimed work (its
        # claims stamped tokens under its own owner; the outcomes then cleared them).
        members = await nodes.query("SELECT replica_id FROM replicas ORDER BY replica_id")
        assert [m[0] for m in members] == ["r1", "r2"]


async def test_a_cancel_on_a_replica_that_runs_none_of_the_work_aborts_the_calls(
    tmp_path: Path, pg_url: str
) -> None:
    hang = ("--latency-ms", "60000")
    async with cluster(tmp_path, pg_url, models=[("fa", 4)], fake_args=hang) as nodes:
        await nodes.start("r1")
        run = await nodes.start_run("r1", 4, ["fa"])

        async def all_in_flight() -> bool:
            return (await nodes.fake.control.stats())["in_flight_all"] == 4

        await wait_for(all_in_flight, timeout_s=30)
        await nodes.start("r2")  # every subtask is r1's: r2 has nothing to claim
        async with nodes.client("r2") as other:
            started = time.monotonic()
            await other.cancel_run(run.run_id)

            async def none_in_flight() -> bool:
                return (await nodes.fake.control.stats())["in_flight_all"] == 0

            await wait_for(none_in_flight, timeout_s=30, every_s=0.02)
            aborted_after = time.monotonic() - started
            final = await other.wait(run.run_id, timeout_s=60)
        assert final.state.value == "cancelled"
        # The target is 1 s; this bound only says the calls were aborted, not answered
        # (they would have taken 60 s), with room for a loaded machine.
        assert aborted_after < 10, aborted_after
        await nodes.assert_complete(run.run_id, 4)


async def test_one_request_id_sent_to_two_replicas_creates_one_run(
    tmp_path: Path, pg_url: str
) -> None:
    async with cluster(tmp_path, pg_url, models=[("fa", 2)]) as nodes:
        await nodes.start("r1")
        await nodes.start("r2")
        async with nodes.client("r1") as one, nodes.client("r2") as two:
            await one.upload_dataset(
                name="reviews",
                version="1.0.0",
                task_type="classification",
                records=classification_records(5),
            )
            runs = []

            async def create(client: object) -> None:
                runs.append(
                    await client.create_run(  # type: ignore[attr-defined]
                        models=["fa"], datasets=[("reviews", "1.0.0")], request_id="same"
                    )
                )

            async with anyio.create_task_group() as tg:
                for client in (one, two, one, two):
                    tg.start_soon(create, client)
        assert len({r.run_id for r in runs}) == 1
        stored = await nodes.query("SELECT COUNT(*) FROM runs")
        assert stored[0][0] == 1


async def _wait_sql(nodes: Cluster, sql: str, *args: object, timeout_s: float = 120) -> Any:
    """Poll the database (one connection, every 5 ms) until ``sql`` returns a row."""
    conn = await asyncpg.connect(nodes.pg_url)
    try:
        return await wait_for(lambda: conn.fetchrow(sql, *args), timeout_s=timeout_s, every_s=0.005)
    finally:
        await conn.close()


async def _crash(nodes: Cluster, replica_id: str, run_id: str) -> Crash:
    killed_at = time.time()
    nodes.kill(replica_id)
    boundary = (await nodes.fake.control.stats())["requests"]
    return Crash(await nodes.succeeded_keys(run_id), boundary, [], killed_at)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_three_replicas_finish_a_run_when_one_dies_mid_inference_and_one_mid_scoring(
    tmp_path: Path, pg_url: str
) -> None:
    limits = {"fa": 6, "fb": 3}  # fb's task finishes later: fa's is scored meanwhile
    fake = ("--latency-ms", "15")
    async with cluster(tmp_path, pg_url, models=list(limits.items()), fake_args=fake) as nodes:
        for replica in ("r1", "r2", "r3"):
            await nodes.start(replica)
        run = await nodes.start_run("r1", 2500, ["fa", "fb"], max_concurrency=RUN_LIMIT)
        # Mid-inference: r1 dies with a quarter done and calls in flight.
        await _wait_sql(
            nodes,
            "SELECT 1 FROM runs WHERE run_id = $1 AND succeeded >= 1250 AND running > 0",
            run.run_id,
        )
        crashes = [await _crash(nodes, "r1", run.run_id)]
        # Mid-scoring: whichever live replica took fa's scoring job dies holding it.
        row = await _wait_sql(
            nodes,
            "SELECT split_part(scorer, '#', 1) FROM tasks WHERE run_id = $1 "
            "AND state = 'scoring' AND scorer IS NOT NULL AND scorer NOT LIKE 'r1#%'",
            run.run_id,
        )
        crashes.append(await _crash(nodes, row[0], run.run_id))
        survivor = ({"r2", "r3"} - {row[0]}).pop()
        async with nodes.client(survivor) as client:
            final = await client.wait(run.run_id, timeout_s=240)
        assert final.state.value == "succeeded"
        await nodes.assert_complete(run.run_id, 5000)
        await assert_no_finished_work_repeated(nodes.fake, *crashes)
        stats = await nodes.fake.control.stats()
        for model, limit in limits.items():
            assert stats["peak_concurrency"][model] <= limit, (model, stats["peak_concurrency"])
        assert stats["peak_concurrency_all"] <= RUN_LIMIT, "the run's limit is global too"


async def test_a_watch_resumes_on_another_replica_when_its_replica_is_killed(
    tmp_path: Path, pg_url: str
) -> None:
    async with cluster(tmp_path, pg_url, models=[("fa", 4)]) as nodes:
        first, second = await nodes.start("r1"), await nodes.start("r2")
        run = await nodes.start_run("r1", 300, ["fa"])
        seqs: list[int] = []
        last = None
        # One client over both replicas (gRPC's pick_first takes r1 while it lives).
        async with AsyncEvaldClient(f"ipv4:{first},{second}") as watcher:
            with anyio.fail_after(120):
                async for event in watcher.watch(run.run_id):
                    seqs.append(event.seq)
                    last = event
                    if len(seqs) == 3:
                        nodes.kill("r1")
        assert seqs == list(range(1, len(seqs) + 1)), "no gap, no duplicate across the switch"
        assert isinstance(last, StateChanged)
        assert last.state.value == "succeeded"
        await nodes.assert_complete(run.run_id, 300)


async def test_sigterm_on_one_replica_hands_its_work_to_the_others_at_once(
    tmp_path: Path, pg_url: str
) -> None:
    # Leases far longer than the test: only the drain's hand-over can move the work.
    fake = ("--latency-ms", "200")
    async with cluster(tmp_path, pg_url, models=[("fa", 4)], fake_args=fake, lease_s=600) as nodes:
        await nodes.start("r1")
        await nodes.start("r2")
        run = await nodes.start_run("r2", 60, ["fa"])
        async with nodes.client("r2") as client:

            async def r1_holds_work() -> bool:
                rows = await nodes.query(
                    "SELECT COUNT(*) FROM subtasks WHERE state = 'running' AND owner LIKE 'r1#%'"
                )
                return bool(rows[0][0])

            await wait_for(r1_holds_work, timeout_s=60, every_s=0.01)
            assert await nodes.terminate("r1") == 0
            final = await client.wait(run.run_id, timeout_s=120)
        assert final.state.value == "succeeded"
        await nodes.assert_complete(run.run_id, 60)
        members = await nodes.query("SELECT replica_id FROM replicas")
        assert [m[0] for m in members] == ["r2"], "r1 left the membership"


VERDICT = "The label is supported.\nVERDICT: PASS"


async def test_a_judged_run_on_two_replicas_judges_each_answer_once_and_a_cache_serves_both(
    tmp_path: Path, pg_url: str
) -> None:
    """The judge phase on PostgreSQL: the judge subtasks an answer creates (in its
    outcome's transaction) are claimed by either replica, each answer judged once; the
    response cache is one for the replicas, so a second run on the other one makes no
    call of the evaluated model."""
    fake_args = (
        "--latency-ms",
        "10",
        "--config-json",
        json.dumps({"model_answers": {"judge": VERDICT}}),
    )
    records = 40
    async with cluster(
        tmp_path, pg_url, models=[("cand", 4), ("judge", 2)], fake_args=fake_args
    ) as nodes:
        await nodes.start("r1")
        await nodes.start("r2")
        spec = {"judge": JudgeOptions(model_id="judge"), "response_cache": True}
        first = await nodes.start_run("r1", records, ["cand"], **spec)
        async with nodes.client("r2") as client:
            final = await client.wait(first.run_id, timeout_s=120)
            assert final.state.value == "succeeded"
            (result,) = await client.results(first.run_id)
        assert result.metrics["judge_pass_rate"] == 1.0
        assert result.provenance.judge is not None
        assert result.provenance.judge.judged_samples == records
        per_answer = await nodes.query(
            "SELECT judged_row_id, COUNT(*), COUNT(*) FILTER (WHERE state = 'succeeded') "
            "FROM subtasks WHERE run_id = $1 AND phase = 1 GROUP BY judged_row_id",
            first.run_id,
        )
        assert len(per_answer) == records
        assert {(n, ok) for _, n, ok in per_answer} == {(1, 1)}
        (task,) = await nodes.query(
            "SELECT total, succeeded FROM tasks WHERE run_id = $1", first.run_id
        )
        assert tuple(task) == (2 * records, 2 * records)
        asked = [e for e in await nodes.fake.control.journal() if e.model == "cand"]
        assert len(asked) == records

        async with nodes.client("r2") as client:
            second = await client.create_run(
                models=["cand"], datasets=[("reviews", "1.0.0")], **spec
            )
            final = await client.wait(second.run_id, timeout_s=120)
            assert final.state.value == "succeeded"
            (again,) = await client.results(second.run_id)
        assert again.execution.cache_hits == records
        asked = [e for e in await nodes.fake.control.journal() if e.model == "cand"]
        assert len(asked) == records, "the second run on the other replica asked nothing"
