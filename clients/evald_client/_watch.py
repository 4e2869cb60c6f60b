"""``watch``: a run's events that survive dropped connections.

On UNAVAILABLE the stream is reopened with ``after_seq`` = the seq of the last logged
event received, after a bounded, jittered backoff; events at or below that seq are
dropped, so the caller sees no gap and no duplicate. The iteration ends with the
stream, after the event of the run's *current* terminal state: a run that ended and was
retried (or resumed) logged a terminal event before its retry, and the server's stream
goes on past it, so the client does too.
"""

import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import grpc

from evald.v1 import service_pb2
from evald_client._convert_events import event_from_proto
from evald_client._errors import EvaldError, Unavailable, error_from_rpc
from evald_client._events import Heartbeat, RunEvent, StateChanged


@dataclass(frozen=True, slots=True, kw_only=True)
class ReconnectPolicy:
    """How ``watch`` reconnects: at most ``max_attempts`` reconnections in a row without
    receiving a new event, waiting ``initial_backoff_s`` doubling up to ``max_backoff_s``
    (each delay drawn in [50 %, 100 %] of that)."""

    max_attempts: int = 8
    initial_backoff_s: float = 0.2
    max_backoff_s: float = 5.0

    def __post_init__(self) -> None:
        if self.max_attempts < 0 or self.initial_backoff_s < 0 or self.max_backoff_s < 0:
            raise ValueError("ReconnectPolicy values must be >= 0")

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait before reconnection number ``attempt`` (from 0)."""
        base = min(self.max_backoff_s, self.initial_backoff_s * 2.0**attempt)
        delay = base * random.uniform(0.5, 1.0)
        if retry_after is not None:  # the server's RetryInfo, capped like our own delays
            delay = max(delay, min(retry_after, self.max_backoff_s))
        return delay


OpenStream = Callable[[service_pb2.WatchRunRequest], Any]
IsTerminal = Callable[[], Awaitable[bool]]


# How a stream that breaks reads at the client: UNAVAILABLE (a drain, a lost
# connection), or CANCELLED when the server went away with the stream still open (it
# cancels its open calls when it stops). This client never cancels a watch it still
# iterates (its own cancel is an asyncio cancellation), so either is the server's doing,
# and the watch, resumable by its cursor, goes on from the last seq it saw.
_RESUMABLE = frozenset({"UNAVAILABLE", "CANCELLED"})


async def watch_events(
    open_stream: OpenStream,
    run_is_terminal: IsTerminal,
    run_id: str,
    after_seq: int,
    policy: ReconnectPolicy,
) -> AsyncGenerator[RunEvent, None]:
    """Events of ``run_id`` with seq > ``after_seq`` until its current terminal state.

    ``open_stream`` starts a WatchRun call, which the server ends (OK) right after the
    event of the run's current terminal state; an earlier terminal event (before a
    retry) does not end it. ``run_is_terminal`` is asked when a stream ends without a
    terminal event last (e.g. the run ended before ``after_seq``).
    """
    last_seq = after_seq
    failures = 0
    while True:
        call = open_stream(service_pb2.WatchRunRequest(run_id=run_id, after_seq=last_seq))
        error: EvaldError | None = None
        cause: grpc.RpcError | None = None
        ended = False  # the last event received was a terminal state change
        try:
            async for response in call:
                event = event_from_proto(response.event)
                if isinstance(event, Heartbeat):
                    yield event  # not logged: its seq never moves the cursor
                    continue
                if response.event.seq <= last_seq:
                    continue  # replayed after a reconnect
                last_seq = response.event.seq
                failures = 0  # progress; heartbeats alone do not refill the budget
                ended = isinstance(event, StateChanged) and event.is_terminal
                if event is None:
                    continue  # a kind newer than this client
                yield event
        except grpc.RpcError as exc:
            error, cause = error_from_rpc(exc), exc
            if error.code not in _RESUMABLE:
                raise error from exc
        finally:
            call.cancel()
        # The server ends a stream OK after the run's current terminal event.
        if error is None and (ended or await run_is_terminal()):
            return
        # The stream broke (UNAVAILABLE, CANCELLED) or ended without the terminal event.
        if failures >= policy.max_attempts:
            if error is not None:
                raise error from cause
            raise Unavailable(
                f"watch of run {run_id!r} ended {failures} times without its terminal event",
                code="UNAVAILABLE",
            )
        await anyio.sleep(policy.delay(failures, error.retry_after if error else None))
        failures += 1
