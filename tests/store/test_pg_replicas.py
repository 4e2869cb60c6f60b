"""Two PostgresStores on one database in one process: what replicas rely on.

Leases (a dead owner's work back to pending, never a live one's; its late outcome
refused), scoring jobs taken once and taken over from a dead scorer, gap-free event
seqs under concurrent appends, idempotent creates and tenant quotas across replicas,
the change feed, replica ids, schema versions and the password kept out of messages.

Nothing here waits for time to pass: the replicas' leases are long, and a replica dies
the way the others see it, its heartbeat stopped and its lease run out in the database
(``die``) — a lease of a fraction of a second would also run out under a loaded machine
for a replica meant to be alive. One test lets a short lease run out by itself, and
polls for what follows. A test that cancels a call waits for the database to show the
call blocked, not for a delay.
"""

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
import asyncpg
import psycopg
import pytest

from evald_server.domain import (
    Cost,
    EventKind,
    OutcomeKind,
    RetryCounts,
    SubtaskPhase,
    TaskState,
    TaskType,
)
from evald_server.store import (
    CALLS_FINISH,
    ChangeKind,
    DatasetRow,
    LiveRunLimitReached,
    NewEvent,
    RecordRow,
    SharedRate,
    StoreChange,
    StoreError,
    StoreUnavailable,
    TaskFinish,
)
from evald_server.store.postgres import LATEST_VERSION, PostgresStore, migrate, redact
from evald_server.store.postgres._leases import _CAPACITY_LOCK, DB_NOW, IDLE_SHARE
from tests._postgres import empty, new_database, pg_url
from tests._shared import wait_for
from tests.store._helpers import add_dataset, add_run
from tests.store.test_runs import assert_counters_match_recount, outcome

__all__ = ["pg_url"]

pytestmark = pytest.mark.anyio

# Long enough never to run out during a test, however loaded the machine; the heartbeat
# runs only when a test calls maintain_once (its own period is longer than any test).
LEASE_S = 120.0
HEARTBEAT_S = 60.0
# A safety bound on waits for something that happens at once (a notice, a cancelled
# call's cleanup): a failure, never a pace.
BOUND_S = 30.0
Open = Callable[..., Awaitable[PostgresStore]]


@pytest.fixture
async def replicas(pg_url: str) -> AsyncIterator[Open]:
    """Opens PostgresStores on the session's (emptied) database; closes them at the end."""
    await empty(pg_url)
    opened: list[PostgresStore] = []

    async def open_one(**options: object) -> PostgresStore:
        settings: dict[str, object] = {
            "lease_s": LEASE_S,
            "heartbeat_s": HEARTBEAT_S,
            "pool_size": 3,
            "replica_id": f"r{len(opened)}",  # one process: the default id would repeat
        }
        settings.update(options)
        store = await PostgresStore.open(pg_url, **settings)
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        await store.close()


async def stop_heartbeat(store: PostgresStore) -> None:
    """The replica hangs (or its host is cut off): it stops renewing its lease."""
    assert store._maintenance is not None
    store._maintenance.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await store._maintenance


async def die(store: PostgresStore, pg_url: str) -> None:
    """The replica hangs and its lease runs out: what the others see once ``lease_s`` has
    passed without a heartbeat, set in the database rather than waited for."""
    await stop_heartbeat(store)
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(
            f"UPDATE replicas SET lease_until = {DB_NOW} WHERE owner = $1", store.owner
        )
    finally:
        await conn.close()


async def test_a_dead_replicas_work_goes_back_to_pending_and_its_late_outcome_is_refused(
    replicas: Open, pg_url: str
) -> None:
    a, b = await replicas(replica_id="a"), await replicas(replica_id="b")
    ds = await add_dataset(a, records=4)
    run = await add_run(a, [ds])
    claimed = (await a.claim_ready(run.run_id, "m1", 3, time.time())).subtasks
    assert len(claimed) == 3
    # A live owner's rows are never taken, however often the others look.
    for _ in range(3):
        assert await b.maintain_once() == 0
    (task,) = await b.get_tasks(run.run_id)
    assert (task.counters.pending, task.counters.running) == (1, 3)
    await die(a, pg_url)
    assert await b.maintain_once() == 3, "b's heartbeat gives a's rows back"
    (task,) = await b.get_tasks(run.run_id)
    assert (task.counters.pending, task.counters.running) == (4, 0)
    again = (await b.claim_ready(run.run_id, "m1", 4, time.time())).subtasks
    assert sorted(c.row_id for c in again) == sorted(
        [c.row_id for c in claimed] + [again[-1].row_id]
    )
    assert {c.attempt for c in again} == {0}, "no retry spent"
    late = await a.record_outcomes(
        [outcome(c, OutcomeKind.SUCCEEDED, output="late") for c in claimed], time.time()
    )
    assert late.applied == 0
    done = await b.record_outcomes(
        [outcome(c, OutcomeKind.SUCCEEDED, output="b") for c in again], time.time()
    )
    assert done.applied == 4
    rows = await b.task_subtasks(task.task_id, (), 0, 10)
    assert {r.output for r in rows} == {"b"}
    await assert_counters_match_recount(b, run.run_id)


async def test_a_lease_runs_out_by_itself_once_the_heartbeat_stops(replicas: Open) -> None:
    a = await replicas(replica_id="a", lease_s=0.5, heartbeat_s=0.1)
    b = await replicas(replica_id="b")
    await stop_heartbeat(a)

    async def a_is_gone() -> bool:
        await b.maintain_once()
        return [m for m, _ in b.members] == ["b"]

    await wait_for(a_is_gone, timeout_s=BOUND_S)


async def test_a_replica_taken_for_dead_joins_again_when_its_heartbeat_returns(
    replicas: Open, pg_url: str
) -> None:
    a, b = await replicas(replica_id="a"), await replicas(replica_id="b")
    await die(a, pg_url)
    await b.maintain_once()
    assert [m for m, _ in b.members] == ["b"]
    await a.maintain_once()  # its heartbeat comes back
    await b.maintain_once()
    assert [m for m, _ in b.members] == ["a", "b"]


async def test_a_scoring_job_is_taken_once_and_taken_over_from_a_dead_scorer(
    replicas: Open, pg_url: str
) -> None:
    a, b = await replicas(replica_id="a"), await replicas(replica_id="b")
    ds = await add_dataset(a, records=1)
    run = await add_run(a, [ds])
    (item,) = (await a.claim_ready(run.run_id, "m1", 1, time.time())).subtasks
    report = await a.record_outcomes(
        [outcome(item, OutcomeKind.SUCCEEDED, output="x")], time.time()
    )
    (task_id,) = report.finished_tasks
    assert await a.claim_scoring(task_id)
    assert not await b.claim_scoring(task_id), "a live scorer holds it"
    await die(a, pg_url)
    assert await b.claim_scoring(task_id)
    finish = TaskFinish(
        task_id=task_id,
        state=TaskState.SUCCEEDED,
        result_status="succeeded",
        result={"by": "a"},
        event_payload={"task_id": task_id},
        time=time.time(),
    )
    refused = await a.finish_task(finish)
    assert (refused.events, refused.run_state) == ((), None), "the old scorer lost the job"
    taken = await b.finish_task(finish)
    assert [e.kind for e in taken.events] == [EventKind.TASK_SCORED, EventKind.RUN_STATE]


async def test_concurrent_appends_from_two_replicas_get_gap_free_seqs(replicas: Open) -> None:
    a, b = await replicas(), await replicas()
    ds = await add_dataset(a, records=1)
    run = await add_run(a, [ds])
    note = NewEvent(EventKind.PROGRESS, {"n": 1}, time.time())
    seqs: list[int] = []

    async def append(store: PostgresStore) -> None:
        for _ in range(20):
            seqs.extend(e.seq for e in await store.append_events(run.run_id, [note, note]))

    async with anyio.create_task_group() as tg:
        for store in (a, b, a, b):
            tg.start_soon(append, store)
    assert sorted(seqs) == list(range(2, 2 + 160))
    stored = await b.read_events(run.run_id, 0, 1000)
    assert [e.seq for e in stored] == list(range(1, 162))


async def test_one_request_id_on_two_replicas_creates_one_run(replicas: Open) -> None:
    a, b = await replicas(), await replicas()
    ds = await add_dataset(a, records=3)
    made = []

    async def create(store: PostgresStore, run_id: str) -> None:
        made.append(await add_run(store, [ds], run_id=run_id, request_id="req", request_hash="h"))

    async with anyio.create_task_group() as tg:
        for i, store in enumerate((a, b, a, b)):
            tg.start_soon(create, store, f"run_{i}")
    assert len({r.run_id for r in made}) == 1
    assert len(await a.list_runs("t1", None, 10)) == 1


async def test_the_tenant_quota_holds_across_replicas(replicas: Open) -> None:
    a, b = await replicas(), await replicas()
    ds = await add_dataset(a, records=1)
    outcomes: list[str] = []

    async def create(store: PostgresStore, run_id: str) -> None:
        try:
            await add_run(store, [ds], run_id=run_id, max_live_runs=2)
            outcomes.append("created")
        except LiveRunLimitReached:
            outcomes.append("refused")

    async with anyio.create_task_group() as tg:
        for i, store in enumerate((a, b) * 3):
            tg.start_soon(create, store, f"run_{i}")
    assert sorted(outcomes) == ["created"] * 2 + ["refused"] * 4
    assert len(await b.live_run_ids()) == 2


async def _next_changes(store: PostgresStore, want: int) -> list[StoreChange]:
    seen: list[StoreChange] = []
    with anyio.fail_after(BOUND_S):
        async for change in store.changes():
            seen.append(change)
            if len(seen) >= want:
                break
    return seen


async def test_the_change_feed_tells_another_replica_what_to_act_on(replicas: Open) -> None:
    a, b = await replicas(), await replicas()
    ds = await add_dataset(a, records=2)
    run = await add_run(a, [ds])
    changes = await _next_changes(b, 2)
    assert {(c.kind, c.run_id) for c in changes} == {
        (ChangeKind.WORK, run.run_id),
        (ChangeKind.EVENTS, run.run_id),
    }
    await a.cancel_run(run.run_id, time.time())
    changes = await _next_changes(b, 2)
    kinds = {c.kind: c for c in changes}
    assert set(kinds) == {ChangeKind.CANCEL, ChangeKind.EVENTS}
    cancelled = await b.get_run(run.run_id)
    assert cancelled is not None
    assert kinds[ChangeKind.EVENTS].detail == str(cancelled.last_seq)


async def test_a_budgets_cancel_tells_the_other_replicas_to_let_calls_finish(
    replicas: Open,
) -> None:
    a, b = await replicas(), await replicas()
    ds = await add_dataset(a, records=2)
    spent = await add_run(a, [ds], run_id="run_spent")
    stopped = await add_run(a, [ds], run_id="run_stopped")
    await _next_changes(b, 4)
    await a.cancel_run(spent.run_id, time.time(), reason="cost budget reached")
    await a.cancel_run(stopped.run_id, time.time())
    changes = await _next_changes(b, 4)
    cancels = {c.run_id: c.detail for c in changes if c.kind is ChangeKind.CANCEL}
    assert cancels == {spent.run_id: CALLS_FINISH, stopped.run_id: ""}
    row = await b.get_run(spent.run_id)
    assert row is not None
    assert row.cancel_reason == "cost budget reached"


async def test_judge_work_an_answer_creates_is_announced_to_the_other_replicas(
    replicas: Open,
) -> None:
    a, b = await replicas(), await replicas()
    ds = await add_dataset(a, records=1)
    run = await add_run(a, [ds], judge=("judge", 2))
    await _next_changes(b, 2)  # the new run's work and its first event
    (item,) = (await a.claim_ready(run.run_id, "m1", 1, time.time())).subtasks
    await _next_changes(b, 1)  # the run started
    report = await a.record_outcomes(
        [outcome(item, OutcomeKind.SUCCEEDED, output="x")], time.time()
    )
    assert report.judge_work == ((run.run_id, "judge"),)
    (change,) = await _next_changes(b, 1)
    assert (change.kind, change.run_id) == (ChangeKind.WORK, run.run_id)
    judges = (await b.claim_ready(run.run_id, "judge", 5, time.time())).subtasks
    assert [(j.judge_round, j.answer) for j in judges] == [(0, "x"), (1, "x")]


async def test_a_replica_hears_nothing_of_its_own_changes(replicas: Open) -> None:
    a, b = await replicas(), await replicas()
    ds = await add_dataset(a, records=2)
    await add_run(a, [ds], run_id="run_a")
    await add_run(b, [ds], run_id="run_b")
    # Notices arrive in commit order: a's own would come before b's.
    changes = await _next_changes(a, 2)
    assert {(c.kind, c.run_id) for c in changes} == {
        (ChangeKind.WORK, "run_b"),
        (ChangeKind.EVENTS, "run_b"),
    }


async def test_a_live_replica_id_cannot_be_used_twice(replicas: Open) -> None:
    await replicas(replica_id="same")
    with pytest.raises(StoreError, match="replica id 'same' is in use by a live replica"):
        await replicas(replica_id="same")


async def test_a_database_from_a_newer_evald_is_refused(replicas: Open, pg_url: str) -> None:
    store = await replicas()
    await store.close()
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute("UPDATE schema_version SET version = $1", LATEST_VERSION + 1)
        with pytest.raises(StoreError, match="newer than this evald supports"):
            await replicas()
    finally:
        await conn.execute("UPDATE schema_version SET version = $1", LATEST_VERSION)
        await conn.close()


@pytest.fixture
async def other_database(pg_url: str) -> AsyncIterator[str]:
    """A second, empty database beside the session's (dropped at the end)."""
    async with new_database(pg_url, "b") as url:
        yield url


async def test_a_version_1_database_is_migrated_and_its_work_goes_on(
    other_database: str,
) -> None:
    """A database written before rate control and the judge phase (schema 1): its rows
    read back with no cost, no failures per class and in the answer phase, and its
    pending work is claimed and finished with the new columns."""
    conn = await asyncpg.connect(other_database)
    try:
        assert await migrate(conn, target=1) == 0
        now = time.time()
        await conn.execute(
            "INSERT INTO datasets (dataset_id, tenant, name, benchmark_version, task_type, "
            "sha256, record_count, created_at) "
            "VALUES ('ds', 't1', 'ds', '1.0.0', 'classification', $1, 1, $2)",
            "0" * 64,
            now,
        )
        await conn.execute(
            "INSERT INTO dataset_records (dataset_id, idx, record_id, fields) "
            "VALUES ('ds', 0, 'r0', '{\"text\": \"x\"}')"
        )
        await conn.execute(
            "INSERT INTO runs (run_id, tenant, name, spec, state, total, pending, created_at) "
            "VALUES ('run_1', 't1', 'old', '{}', 'pending', 1, 1, $1)",
            now,
        )
        await conn.execute(
            "INSERT INTO tasks (task_id, run_id, ordinal, model_id, model, dataset_id, state, "
            "total, pending) VALUES ('t0', 'run_1', 0, 'm1', '{}', 'ds', 'pending', 1, 1)"
        )
        await conn.execute(
            "INSERT INTO subtasks (run_id, task_id, model_id, record_idx, repeat_index, state, "
            "updated_at) VALUES ('run_1', 't0', 'm1', 0, 0, 'pending', $1)",
            now,
        )
    finally:
        await conn.close()
    store = await PostgresStore.open(other_database, pool_size=2)
    try:
        run = await store.get_run("run_1")
        assert run is not None
        assert (run.cost, run.cancel_reason) == (Cost(), None)
        (item,) = (await store.claim_ready("run_1", "m1", 5, time.time())).subtasks
        assert (item.failures, item.phase, item.answer) == (
            RetryCounts(),
            SubtaskPhase.ANSWER,
            None,
        )
        cost = Cost(picousd=5, tokens=3)
        await store.record_outcomes(
            [outcome(item, OutcomeKind.SUCCEEDED, output="a", cost=cost)], now
        )
        run = await store.get_run("run_1")
        assert run is not None
        assert run.cost == cost
        assert await store.cache_size() == 0
    finally:
        await store.close()
    conn = await asyncpg.connect(other_database)
    try:
        assert await conn.fetchval("SELECT version FROM schema_version") == LATEST_VERSION
    finally:
        await conn.close()


async def test_the_database_password_never_appears_in_a_message() -> None:
    url = "postgresql://evald:s3cret-pw@127.0.0.1:1/evald?sslpassword=s3cret-pw"
    assert redact(url) == "postgresql://evald@127.0.0.1:1/evald"
    with pytest.raises(StoreError) as refused:
        await PostgresStore.open(url, wait_s=0.0)
    assert "s3cret-pw" not in str(refused.value)
    assert "127.0.0.1:1" in str(refused.value)


async def test_a_models_limit_is_shared_and_a_share_moves_only_once_it_is_free(
    replicas: Open, pg_url: str
) -> None:
    a = await replicas(replica_id="a")
    assert (await a.capacity_shares({"m": 5}, {"m": 0})).slots == {"m": 5}
    b = await replicas(replica_id="b")
    # b's fair share (2) is still held by a, which has 5 calls in flight.
    assert (await b.capacity_shares({"m": 5}, {"m": 0})).slots == {"m": 0}
    assert (await a.capacity_shares({"m": 5}, {"m": 5})).slots == {"m": 3}
    assert (await b.capacity_shares({"m": 5}, {"m": 0})).slots == {"m": 0}, "a still holds 5"
    # a's calls came back under its share: a holds 3 now, b may take its 2.
    assert (await a.capacity_shares({"m": 5}, {"m": 3})).slots == {"m": 3}
    assert (await b.capacity_shares({"m": 5}, {"m": 0})).slots == {"m": 2}
    # a dies: once its lease has expired, b may use the whole limit.
    await die(a, pg_url)
    assert (await b.capacity_shares({"m": 5}, {"m": 2})).slots == {"m": 5}


async def test_every_shared_limit_is_balanced_on_its_own(replicas: Open) -> None:
    a, b = await replicas(replica_id="a"), await replicas(replica_id="b")
    limits = {"m": 4, "@run:x": 3}
    first = (await a.capacity_shares(limits, {"m": 0, "@run:x": 0})).slots
    assert first == {"m": 2, "@run:x": 2}, "a's fair shares: b holds nothing yet"
    assert (await b.capacity_shares(limits, {"m": 0, "@run:x": 0})).slots == {"m": 2, "@run:x": 1}


async def test_an_upload_cut_off_by_a_lost_connection_stores_nothing_and_can_be_redone(
    replicas: Open, pg_url: str
) -> None:
    store = await replicas()
    database = pg_url.rsplit("/", 1)[1]

    def records(cut_at: int | None) -> Iterator[RecordRow]:
        for i in range(2000):
            if i == cut_at:  # the database drops this replica's connections mid-COPY
                with psycopg.connect(pg_url) as admin:
                    admin.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = %s AND application_name = %s",
                        (database, f"evald {store.replica_id}"),
                    )
            yield RecordRow(idx=i, record_id=f"r{i}", fields={"text": f"x{i}"})

    row = DatasetRow(
        dataset_id="ds_cut",
        tenant="t1",
        name="cut",
        benchmark_version="1.0.0",
        task_type=TaskType.CLASSIFICATION,
        content_sha256="0" * 64,
        record_count=2000,
        prompt_template=None,
        created_at=time.time(),
    )
    with pytest.raises(StoreUnavailable, match="upload it again"):
        await store.create_dataset(row, records(cut_at=1000))
    assert await store.get_dataset("ds_cut") is None, "nothing stored half-way"
    created, fresh = await store.create_dataset(row, records(cut_at=None))
    assert fresh
    assert len(await store.read_records(created.dataset_id, list(range(2000)))) == 2000


async def test_a_rate_is_shared_by_demand_and_the_shares_never_add_up_above_it(
    replicas: Open,
) -> None:
    a, b = await replicas(replica_id="a"), await replicas(replica_id="b")
    rpm = "@rpm:m"

    async def share(store: PostgresStore, held: float, demand: float) -> float:
        balance = await store.capacity_shares({}, {}, {rpm: SharedRate(600.0, held, demand)})
        assert balance.replicas == 2
        return balance.rates[rpm]

    # Nobody wants any yet: half each.
    assert await share(a, 0.0, 0.0) == pytest.approx(300.0)
    assert await share(b, 0.0, 0.0) == pytest.approx(300.0)
    # a is busy, b idle: a's share grows, but only into what b no longer holds.
    assert await share(a, 300.0, 50.0) == pytest.approx(300.0), "b still holds 300"
    idle = await share(b, 300.0, 0.0)
    assert idle == pytest.approx(600.0 * IDLE_SHARE / 2 / (1 + IDLE_SHARE))
    assert await share(b, idle, 0.0) == pytest.approx(idle), "b holds its small share now"
    busy = await share(a, 300.0, 50.0)
    assert busy == pytest.approx(600.0 - idle)
    # b gets busy as well: a gives back, and b gets it once a has published so.
    assert await share(b, idle, 50.0) == pytest.approx(idle), "a still holds its share"
    assert await share(a, busy, 50.0) == pytest.approx(300.0, rel=0.05)
    assert await share(b, idle, 50.0) == pytest.approx(idle), "a's budget still runs at busy"
    given_back = await share(a, 300.0, 50.0)
    assert await share(b, idle, 50.0) == pytest.approx(600.0 - given_back)


async def test_a_rate_goes_whole_to_the_replica_left_and_figures_are_summed(
    replicas: Open,
) -> None:
    a, b = await replicas(replica_id="a"), await replicas(replica_id="b")
    rate = {"@tpm:m": SharedRate(10_000.0, 0.0, 100.0)}
    figures = {"@concurrency:m": 3.0, "@episodes:m": 2.0}
    await a.capacity_shares({}, {}, rate, figures)
    seen = await b.capacity_shares({}, {}, rate, {"@concurrency:m": 4.0, "@episodes:m": 1.0})
    assert seen.peers == {"@concurrency:m": 3.0, "@episodes:m": 2.0}, "a's figures"
    assert sum(seen.rates.values()) <= 10_000.0
    await a.close()  # a leaves: its row goes, b's share is the whole rate
    alone = await b.capacity_shares({}, {}, {"@tpm:m": SharedRate(10_000.0, 5_000.0, 100.0)})
    assert alone.replicas == 1
    assert alone.rates == {"@tpm:m": pytest.approx(10_000.0)}


async def _cancel_once_blocked(pg_url: str, store: PostgresStore, scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once the database shows one of ``store``'s connections waiting
    for a lock."""
    watcher = await asyncpg.connect(pg_url)
    try:

        async def blocked() -> bool:
            waiting = await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE application_name = $1 AND wait_event_type = 'Lock'",
                f"evald {store.replica_id}",
            )
            return bool(waiting)

        await wait_for(blocked, timeout_s=BOUND_S)
    finally:
        await watcher.close()
    scope.cancel()


async def _cancelled_while_blocked(
    pg_url: str,
    store: PostgresStore,
    block: list[tuple[str, tuple[object, ...]]],
    call: Callable[[], Awaitable[object]],
) -> None:
    """Run ``call`` while another connection holds what it needs (``block``'s statements,
    in one open transaction), cancel it once it waits there, and check that it ended with
    the cancel: every task it left behind ends by itself, and nothing is reported to the
    loop (an error nobody retrieved, a connection released in the middle of a
    transaction)."""
    loop_errors: list[dict[str, object]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: loop_errors.append(context))
    blocker = await asyncpg.connect(pg_url)
    try:
        await blocker.execute("BEGIN")
        for sql, args in block:
            await blocker.execute(sql, *args)
        before = asyncio.all_tasks()
        scope = anyio.CancelScope()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_cancel_once_blocked, pg_url, store, scope)
            with scope:
                await call()
        assert scope.cancelled_caught, "the call should have waited for the blocker"
        # Waited for without taking their results: an error in one stays unretrieved,
        # and is reported to the loop when the task is collected.
        left = [t for t in asyncio.all_tasks() - before if not t.done()]
        if left:
            _, running = await asyncio.wait(left, timeout=BOUND_S)
            assert not running, f"tasks left running after the cancel: {running}"
    finally:
        await blocker.close()
        gc.collect()  # a task nobody awaited reports its error when collected
        loop.set_exception_handler(None)
    assert not loop_errors, [context.get("message") for context in loop_errors]


async def test_a_balancing_cancelled_mid_query_ends_with_the_cancel(
    replicas: Open, pg_url: str
) -> None:
    """A replica stopping (its engine's task group cancelled) while a balancing waits on
    the database: the balancing ends in its own task, nothing fails unseen behind it
    ("Task exception was never retrieved"), and the next balancing works."""
    store = await replicas()
    lock = [("SELECT pg_advisory_xact_lock($1)", (_CAPACITY_LOCK,))]
    await _cancelled_while_blocked(
        pg_url, store, lock, lambda: store.capacity_shares({"m": 5}, {"m": 0})
    )
    assert (await store.capacity_shares({"m": 5}, {"m": 0})).slots == {"m": 5}


async def test_a_heartbeat_cancelled_mid_query_ends_with_the_cancel(
    replicas: Open, pg_url: str
) -> None:
    """The store closing while its heartbeat waits on its replica's row."""
    store = await replicas()
    row = [("SELECT 1 FROM replicas WHERE replica_id = $1 FOR UPDATE", (store.replica_id,))]
    await _cancelled_while_blocked(pg_url, store, row, store.maintain_once)
    assert await store.maintain_once() == 0
