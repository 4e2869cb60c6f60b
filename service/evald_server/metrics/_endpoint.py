"""The ``/metrics`` endpoint on its own loopback port (``[metrics] listen``), served by
aiohttp on the server's event loop so that a scrape can read the store asynchronously.
It has no authentication: the config allows loopback addresses only."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from evald_server.app import Evald
from evald_server.metrics._outcomes import OutcomeMetrics
from evald_server.metrics._state import StateCollector

log = logging.getLogger("evald.metrics")


def _split(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


@asynccontextmanager
async def metrics_endpoint(app: Evald, listen: str | None) -> AsyncIterator[str | None]:
    """Serve ``http://LISTEN/metrics`` for the block; yields "host:port" (None when off)."""
    if listen is None:
        yield None
        return
    registry = CollectorRegistry(auto_describe=True)
    outcomes = OutcomeMetrics(registry)
    state = StateCollector(app.engine.limiter_stats)
    registry.register(state)
    app.engine.outcome_observers.append(outcomes.observe)

    async def scrape(request: web.Request) -> web.Response:
        state.refresh(await app.store.state_counts())
        return web.Response(
            body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    web_app = web.Application()
    web_app.router.add_get("/metrics", scrape)
    runner = web.AppRunner(web_app, access_log=None)
    await runner.setup()
    try:
        host, port = _split(listen)
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound_host, bound_port = runner.addresses[0][:2]
        address = f"{bound_host}:{bound_port}"
        log.info("evald metrics on http://%s/metrics", address)
        yield address
    finally:
        app.engine.outcome_observers.remove(outcomes.observe)
        await runner.cleanup()
