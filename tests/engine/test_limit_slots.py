"""Limit slots are never leaked: a waiter cancelled before or after it was granted a
slot, the FIFO hand-over, and a finished run's limit being forgotten. (The grant race
needs a cancellation that lands between the grant and the waiter running: plain
asyncio tasks give that exactly; the server runs on asyncio.)"""

import asyncio

import anyio
import anyio.lowlevel
import pytest

from evald_server.engine import RUN_LIMIT, Limit, Limiter
from evald_server.engine._limits import RunSlot

pytestmark = pytest.mark.anyio


async def test_a_waiter_cancelled_while_waiting_leaves_the_queue_and_reraises() -> None:
    limit = Limit("test", "k", 1)
    assert limit.try_acquire()
    reached = False
    with anyio.move_on_after(0.05) as scope:
        await limit.acquire()
        reached = True
    assert scope.cancelled_caught, "the cancellation propagated out of acquire"
    assert not reached
    assert (limit.in_use, limit.stats().waiting) == (1, 0), "its place in the queue is gone"
    limit.release()
    assert limit.in_use == 0, "the release was not handed to the cancelled waiter"
    assert limit.try_acquire()


async def test_a_waiter_cancelled_after_its_grant_hands_the_slot_on() -> None:
    limit = Limit("test", "k", 1)
    assert limit.try_acquire()
    first = asyncio.ensure_future(limit.acquire())
    second = asyncio.ensure_future(limit.acquire())
    while limit.stats().waiting < 2:
        await anyio.lowlevel.checkpoint()
    limit.release()  # granted to the first waiter...
    first.cancel()  # ...which is cancelled before it runs: the slot goes to the next
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 5)
    assert (limit.in_use, limit.stats().waiting) == (1, 0), "the second holds it"
    limit.release()
    assert limit.in_use == 0


async def test_a_cancelled_grant_with_nobody_waiting_frees_the_slot() -> None:
    limit = Limit("test", "k", 1)
    assert limit.try_acquire()
    waiter = asyncio.ensure_future(limit.acquire())
    while limit.stats().waiting < 1:
        await anyio.lowlevel.checkpoint()
    limit.release()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limit.in_use == 0, "the granted slot was given back"
    assert limit.try_acquire()


async def test_waiters_are_served_first_come_first_served() -> None:
    limit = Limit("test", "k", 2)
    assert limit.try_acquire()
    assert limit.try_acquire()
    assert not limit.try_acquire()
    order: list[int] = []
    async with anyio.create_task_group() as tg:
        for i in range(3):

            async def waiter(i: int = i) -> None:
                await limit.acquire()
                order.append(i)

            tg.start_soon(waiter)
            while limit.stats().waiting < i + 1:
                await anyio.lowlevel.checkpoint()
        # A free-looking slot is not taken past the queue.
        assert not limit.try_acquire()
        for _ in range(3):
            limit.release()
    assert order == [0, 1, 2]
    assert limit.in_use == 2


def test_a_finished_runs_limit_is_forgotten() -> None:
    limiter = Limiter(4, {"m": 2})
    limiter.add_run("r1", 3)
    limiter.add_run("r2", None)
    r1 = limiter.run("r1")
    assert r1 is not None
    assert (r1.name, r1.key, r1.capacity) == (RUN_LIMIT, "r1", 3)
    assert limiter.run("r2") is None, "no max_concurrency: no run limit"
    assert r1.try_acquire()
    limiter.add_run("r1", 3)  # registering again (a retry, a restart) keeps the slots
    assert limiter.run("r1") is r1
    assert r1.in_use == 1
    assert {(s.name, s.key) for s in limiter.stats()} == {
        ("max_inflight", "server"),
        ("model.max_concurrency", "m"),
        (RUN_LIMIT, "r1"),
    }
    limiter.remove_run("r1")
    assert limiter.run("r1") is None
    assert RUN_LIMIT not in {s.name for s in limiter.stats()}
    limiter.remove_run("r1")  # forgetting twice is harmless


async def test_a_ceiling_caps_the_capacity_and_a_cut_lets_calls_in_flight_finish() -> None:
    limit = Limit("test", "k", 4)
    limit.set_ceiling(0)  # a replica that has no share yet
    assert not limit.try_acquire()
    assert limit.held == 0
    waiter = asyncio.ensure_future(limit.acquire())
    await anyio.lowlevel.checkpoint()
    limit.set_ceiling(3)  # its share arrives: the waiter is admitted at once
    await waiter
    assert limit.try_acquire()
    assert limit.try_acquire()
    assert not limit.try_acquire(), "at most the share"
    limit.set_ceiling(1)  # the share shrinks under three calls in flight
    assert limit.held == 3, "it may still be using 3 slots"
    limit.release()
    limit.release()
    assert not limit.try_acquire(), "no slot until below the new share"
    assert limit.held == 1
    limit.set_ceiling(None)
    assert limit.held == 4


def test_a_run_slot_is_given_back_once() -> None:
    limit = Limit(RUN_LIMIT, "run", 1)
    assert limit.try_acquire()
    slot = RunSlot(limit)
    assert slot.held
    assert slot.give_back()
    assert (limit.in_use, slot.held) == (0, False)
    assert not slot.give_back(), "released once, however often it is given back"
    assert limit.in_use == 0
    assert not RunSlot(None).held
    assert not RunSlot(None).give_back(), "a run without a limit holds no slot"
