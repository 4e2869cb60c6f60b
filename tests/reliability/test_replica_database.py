"""A replica and its database: health follows the database's reachability, a run goes
on after every backend connection was terminated, and the database password stays out
of logs, errors and answers."""

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from evald_client import AsyncEvaldClient, Unavailable
from evald_server.config import ConfigError, parse_config
from tests._postgres import empty, pg_url
from tests._shared import wait_for
from tests._tcp_proxy import TcpProxy
from tests.api._support import health_status
from tests.harness import ServerProcess, config_data, running_server, write_config
from tests.reliability._cluster import cluster

__all__ = ["pg_url"]

pytestmark = pytest.mark.anyio


def _through(url: str, port: int) -> str:
    parts = urlsplit(url)
    user = parts.username or "postgres"
    return urlunsplit((parts.scheme, f"{user}@127.0.0.1:{port}", parts.path, "", ""))


async def test_health_is_not_serving_while_the_database_is_unreachable_and_serving_after(
    tmp_path: Path, pg_url: str
) -> None:
    await empty(pg_url)
    target = urlsplit(pg_url)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 5432)
    await proxy.start()
    data = config_data(tmp_path)
    data["store"] = {
        "url": _through(pg_url, proxy.port),
        "replica_id": "solo",
        "lease_s": 2.0,
        "heartbeat_s": 0.2,
    }
    async with running_server(parse_config(data)) as address:
        assert await health_status(address) == "SERVING"
        await proxy.cut()

        async def not_serving() -> bool:
            return await health_status(address) == "NOT_SERVING"

        await wait_for(not_serving, timeout_s=30, every_s=0.1)
        await proxy.restore()

        async def serving() -> bool:
            return await health_status(address) == "SERVING"

        await wait_for(serving, timeout_s=30, every_s=0.1)
        async with AsyncEvaldClient(address) as client:
            assert [m.model_id for m in await client.list_models()]
    await proxy.cut()


async def test_a_run_goes_on_after_the_database_terminated_every_backend(
    tmp_path: Path, pg_url: str
) -> None:
    async with cluster(tmp_path, pg_url, models=[("fa", 4)]) as nodes:
        await nodes.start("r1")
        await nodes.start("r2")
        run = await nodes.start_run("r1", 400, ["fa"])
        async with nodes.client("r1") as client:

            async def a_quarter_done() -> bool:
                rows = await nodes.query("SELECT succeeded FROM runs WHERE run_id = $1", run.run_id)
                return bool(rows[0][0] >= 100)

            await wait_for(a_quarter_done, timeout_s=60)
            database = urlsplit(pg_url).path.strip("/")
            admin = await asyncpg.connect(pg_url)
            try:
                killed = await admin.fetchval(
                    "SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM "
                    "pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()) AS t",
                    database,
                )
            finally:
                await admin.close()
            assert killed >= 4, "both replicas' pools and feeds were cut"
            final = await client.wait(run.run_id, timeout_s=120)
        assert final.state.value == "succeeded"
        await nodes.assert_complete(run.run_id, 400)


def test_the_database_password_stays_out_of_config_errors() -> None:
    data = {"store": {"url": "postgresql://evald:s3cret-pw@db/evald", "heartbeat_s": 9.0}}
    with pytest.raises(ConfigError) as refused:
        parse_config(data)
    assert "heartbeat_s" in str(refused.value)
    assert "s3cret-pw" not in str(refused.value)


def test_the_database_password_stays_out_of_start_errors_and_logs(tmp_path: Path) -> None:
    data = config_data(tmp_path)
    data["store"] = {"url": "postgresql://evald:s3cret-pw@127.0.0.1:1/evald"}
    server = ServerProcess(write_config(tmp_path, data))
    with pytest.raises(RuntimeError, match="server did not start"):
        server.start()
    server.kill()
    said = server.stderr()
    assert "cannot open the store postgresql://evald@127.0.0.1:1/evald" in said
    assert "s3cret-pw" not in said


async def test_calls_answer_store_unavailable_while_the_database_stays_away(
    tmp_path: Path, pg_url: str
) -> None:
    await empty(pg_url)
    target = urlsplit(pg_url)
    proxy = TcpProxy(target.hostname or "127.0.0.1", target.port or 5432)
    await proxy.start()
    data = config_data(tmp_path)
    data["store"] = {
        "url": _through(pg_url, proxy.port),
        "replica_id": "solo",
        "lease_s": 2.0,
        "heartbeat_s": 0.2,
        "unavailable_wait_s": 0.5,
    }
    async with running_server(parse_config(data)) as address, AsyncEvaldClient(address) as client:

        async def runs() -> list[object]:
            return [run async for run in client.list_runs()]

        assert await runs() == []
        await proxy.cut()
        with pytest.raises(Unavailable) as refused:
            await runs()
        # A retryable refusal in the taxonomy, not INTERNAL; where the database lives
        # stays in the server's log.
        assert refused.value.reason == "STORE_UNAVAILABLE", refused.value
        assert refused.value.retry_after is not None
        assert str(proxy.port) not in str(refused.value)
        await proxy.restore()

        async def answered() -> bool:
            try:
                return await runs() == []
            except Unavailable:
                return False

        await wait_for(answered, timeout_s=30, every_s=0.2)
    await proxy.cut()
