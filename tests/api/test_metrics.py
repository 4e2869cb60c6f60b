"""The Prometheus endpoint: scraped during and after a real run on simulated models."""

from pathlib import Path

import aiohttp
import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from evald_client import AsyncEvaldClient, RetryPolicy
from evald_server.config import ConfigError, parse_config
from tests._shared import classification_records, free_port
from tests.harness import config_data, running_server

RECORDS = 120


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.mark.anyio
async def test_scraping_during_and_after_a_run(tmp_path: Path) -> None:
    port = free_port()
    models = [
        {
            "id": "sim-slow",
            "provider": "simulated",
            "max_concurrency": 4,
            "simulator": {"accuracy": 0.7, "latency_ms_median": 15.0, "fault_rate": 0.2, "seed": 3},
        }
    ]
    data = config_data(tmp_path, models=models)
    data["metrics"] = {"listen": f"127.0.0.1:{port}"}
    url = f"http://127.0.0.1:{port}/metrics"
    async with (
        running_server(parse_config(data)) as address,
        aiohttp.ClientSession() as http,
        AsyncEvaldClient(address) as client,
    ):
        await client.upload_dataset(
            name="m",
            version="1.0.0",
            task_type="classification",
            records=classification_records(RECORDS, prefix="c"),
        )
        run = await client.create_run(
            models=["sim-slow"],
            datasets=[("m", "1.0.0")],
            name="tenant-secret-name",
            retry_policy=RetryPolicy(max_retries=8, backoff_s=(0.01,)),
        )
        busiest = 0.0
        with anyio.fail_after(60):
            while not (await client.get_run(run.run_id)).state.is_terminal:
                async with http.get(url) as response:
                    assert response.status == 200
                    assert response.headers["Content-Type"].startswith("text/plain")
                    live = _samples(await response.text())
                busiest = max(
                    busiest, _value(live, "evald_limit_in_use", limit="model", model="sim-slow")
                )
                await anyio.sleep(0.02)
        async with http.get(url) as response:
            text = await response.text()
    assert busiest >= 1  # a scrape saw calls in flight
    after = _samples(text)
    assert _value(after, "evald_limit_capacity", limit="model", model="sim-slow") == 4
    assert _value(after, "evald_limit_in_use", limit="model", model="sim-slow") == 0
    assert _value(after, "evald_runs", state="succeeded") == 1
    assert _value(after, "evald_subtasks", state="succeeded") == RECORDS
    assert _value(after, "evald_tasks", state="succeeded") == 1
    succeeded = _value(after, "evald_provider_calls_total", model="sim-slow", outcome="succeeded")
    transient = _value(
        after, "evald_provider_calls_total", model="sim-slow", outcome="transient_error"
    )
    assert succeeded == RECORDS
    assert transient > 0  # the 20 % faults, each retried
    assert _value(after, "evald_provider_retries_scheduled_total", model="sim-slow") == transient
    assert (
        _value(after, "evald_provider_errors_total", model="sim-slow", reason="PROVIDER_HTTP_5XX")
        == transient
    )
    count = _value(after, "evald_provider_call_duration_seconds_count", model="sim-slow")
    assert count == succeeded + transient
    assert (
        _value(after, "evald_provider_call_duration_seconds_bucket", model="sim-slow", le="+Inf")
        == count
    )
    # No tenant data in any label: not the run id, the run's name or the dataset.
    for secret in (run.run_id, "tenant-secret-name", '"m"', "local"):
        assert secret not in text


def test_the_endpoint_must_be_loopback(tmp_path: Path) -> None:
    data = config_data(tmp_path)
    data["metrics"] = {"listen": "0.0.0.0:9464"}
    with pytest.raises(ConfigError, match=r"metrics\.listen: .*must be a loopback address"):
        parse_config(data)
