"""watch: typed events, resumption after UNAVAILABLE without gap or duplicate, wait."""

from contextlib import aclosing

import grpc
import pytest

import evald_client as ec
from tests.client import _protos
from tests.client._servicer import FakeEvaluationService, WatchCut

FAST = ec.ReconnectPolicy(max_attempts=3, initial_backoff_s=0.001, max_backoff_s=0.02)
FINAL = _protos.RUN_STATE.Value("RUN_STATE_PARTIAL")


def _logged(events: list[ec.RunEvent]) -> list[int]:
    return [e.seq for e in events if not isinstance(e, ec.Heartbeat)]


async def _collect(
    client: ec.AsyncEvaldClient, run_id: str, after_seq: int = 0
) -> list[ec.RunEvent]:
    async with aclosing(client.watch(run_id, after_seq=after_seq)) as events:
        return [event async for event in events]


@pytest.mark.anyio
async def test_watch_yields_typed_events_and_stops_after_the_terminal_one(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-1"))
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        events = await _collect(client, "r-1")
    log = servicer.events["r-1"]
    assert _logged(events) == [e.seq for e in log]
    assert isinstance(events[0], ec.Heartbeat)
    kinds = {type(e) for e in events}
    assert kinds == {ec.Heartbeat, ec.StateChanged, ec.Progress, ec.SampleFailed, ec.TaskScored}
    last = events[-1]
    assert isinstance(last, ec.StateChanged)
    assert last.state is ec.RunState.PARTIAL
    assert last.previous is ec.RunState.RUNNING
    progress = next(e for e in events if isinstance(e, ec.Progress))
    assert progress.eta_s == pytest.approx(8.0)
    assert [t.task_id for t in progress.progress.tasks] == ["t-1", "t-2"]
    failed = next(e for e in events if isinstance(e, ec.SampleFailed))
    assert (failed.model_id, failed.error.reason) == ("sim-b", "PROVIDER_TIMEOUT")
    assert failed.error.category is ec.ErrorCategory.MODEL_PROVIDER_ERROR
    scored = [e.result for e in events if isinstance(e, ec.TaskScored)]
    assert [r.metrics["accuracy"] for r in scored] == [0.9, 0.7]


@pytest.mark.anyio
async def test_watch_resumes_after_cuts_with_no_gap_and_no_duplicate(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-1"))
    # Cut after 3 events, then after 4 more; the third call resends the 2 events before
    # the cursor (a sloppy server): the client drops what it has already seen.
    servicer.watch_cuts = [WatchCut(after_events=3), WatchCut(after_events=4, rewind=2)]
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        events = await _collect(client, "r-1")
    expected = [e.seq for e in servicer.events["r-1"]]
    assert _logged(events) == expected
    assert [after for _, after in servicer.watch_requests] == [0, 3, 7]


@pytest.mark.anyio
async def test_a_stream_the_server_cancels_resumes_like_one_it_drops(
    servicer: FakeEvaluationService, address: str
) -> None:
    # A server that stops with a watch still open cancels it: the client sees CANCELLED,
    # which it never causes itself while it iterates, and resumes from its cursor.
    servicer.add_run(_protos.run("r-1"))
    servicer.watch_cuts = [WatchCut(after_events=3, code=grpc.StatusCode.CANCELLED)]
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        events = await _collect(client, "r-1")
    assert _logged(events) == [e.seq for e in servicer.events["r-1"]]
    assert [after for _, after in servicer.watch_requests] == [0, 3]


@pytest.mark.anyio
async def test_watch_from_a_cursor_skips_what_came_before(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-1"))
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        events = await _collect(client, "r-1", after_seq=6)
    assert _logged(events) == [e.seq for e in servicer.events["r-1"] if e.seq > 6]


@pytest.mark.anyio
async def test_watch_gives_up_after_the_reconnect_budget(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-1"))
    servicer.watch_cuts = [WatchCut(after_events=0) for _ in range(10)]
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        with pytest.raises(ec.Unavailable) as info:
            await _collect(client, "r-1")
    assert info.value.reason == "SERVER_DRAINING"
    assert info.value.retry_after == pytest.approx(0.01)
    assert len(servicer.watch_requests) == FAST.max_attempts + 1


@pytest.mark.anyio
async def test_watch_does_not_retry_other_errors(
    servicer: FakeEvaluationService, address: str
) -> None:
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        with pytest.raises(ec.NotFound):
            await _collect(client, "r-missing")
    assert servicer.watch_requests == []


@pytest.mark.anyio
async def test_watch_ending_early_asks_the_run_and_stops_when_terminal(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-1", FINAL))
    servicer.end_watch_early = True
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        events = await _collect(client, "r-1")
    assert len(servicer.watch_requests) == 1
    assert not any(isinstance(e, ec.StateChanged) and e.is_terminal for e in events)


@pytest.mark.anyio
async def test_watch_ending_early_on_a_live_run_reconnects(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-1"))  # still RUNNING per GetRun
    servicer.end_watch_early = True
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        with pytest.raises(ec.Unavailable, match="without its terminal event"):
            await _collect(client, "r-1")
    assert len(servicer.watch_requests) == FAST.max_attempts + 1


@pytest.mark.anyio
async def test_breaking_out_of_watch_cancels_the_stream(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-1"))
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        async with aclosing(client.watch("r-1")) as events:
            async for event in events:
                if isinstance(event, ec.Progress):
                    break
        # The client still works after the abandoned stream.
        assert (await client.get_run("r-1")).run_id == "r-1"


@pytest.mark.anyio
async def test_wait_returns_at_once_for_a_terminal_run_and_follows_a_live_one(
    servicer: FakeEvaluationService, address: str
) -> None:
    servicer.add_run(_protos.run("r-done", FINAL))
    servicer.add_run(_protos.run("r-live", last_seq=4))
    async with ec.AsyncEvaldClient(address, reconnect=FAST) as client:
        done = await client.wait("r-done")
        assert done.state is ec.RunState.PARTIAL
        assert servicer.watch_requests == []
        await client.wait("r-live")
    assert servicer.watch_requests == [("r-live", 4)]


def test_reconnect_delays_are_bounded_and_honour_retry_after() -> None:
    policy = ec.ReconnectPolicy(max_attempts=5, initial_backoff_s=0.1, max_backoff_s=1.0)
    for attempt in range(10):
        delay = policy.delay(attempt, None)
        assert 0.0 < delay <= 1.0
        assert delay >= 0.5 * min(1.0, 0.1 * 2**attempt)
    assert policy.delay(0, 0.8) >= 0.8
    assert policy.delay(0, 60.0) <= 1.0
    with pytest.raises(ValueError, match=">= 0"):
        ec.ReconnectPolicy(max_attempts=-1)
